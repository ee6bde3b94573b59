import { z } from 'zod';
import { parseConfig } from '../config.js';
import { TARGET_NAME } from '../rollout/spec.js';
import { own } from '../own.js';

/**
 * The targets an operator lets rollouts move, by name. A spec names targets
 * from this list only (`actuators: ["web"]`): it never names a file, a
 * command, a function or a load balancer itself (docs/operating/security.md#security-who-may-do-what). Unknown fields are refused.
 */

export { TARGET_NAME };

const upstream = z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'an nginx upstream name: letters, digits, _ . : - (at most 128)');
const absPath = z.string().regex(/^\/[^\0\n]{0,1023}$/, 'an absolute path');
const arn = (service: string) => z.string().regex(new RegExp(`^arn:aws[a-z-]*:${service}:[a-z0-9-]+:\\d{12}:.{1,1000}$`), `an ${service} ARN`);

export const nginxTargetSchema = z
  .object({
    type: z.literal('nginx'),
    /** The include we own and rewrite whole: a `split_clients` block that sets `variable`. The operator's config includes it. */
    include: absPath,
    /** The variable the split sets (without `$`); the operator's config proxies to it. */
    variable: z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'an nginx variable name without $')
      .default('rollout_upstream'),
    /** What keeps an entity on one side: any nginx expression, e.g. `$remote_addr` or `$http_x_user_id`. */
    key: z
      .string()
      .regex(/^[$A-Za-z0-9_{}:.-]{1,200}$/, 'an nginx expression of variables')
      .default('$remote_addr'),
    stableUpstream: upstream,
    canaryUpstream: upstream,
    /** The nginx binary, and the main config it tests and reloads with (`nginx -t -c`, `nginx -s reload -c`). */
    nginx: absPath.default('/usr/sbin/nginx'),
    config: absPath,
    /** nginx's `-p` prefix and `-e` error log, when the server was started with them: `-t` and `-s reload` must name the same. */
    prefix: absPath.optional(),
    errorLog: absPath.optional(),
  })
  .strict();

export const lambdaAliasTargetSchema = z
  .object({
    type: z.literal('lambdaAlias'),
    /** A function name or ARN. */
    functionName: z.string().min(1).max(170),
    alias: z.string().regex(/^(?!^[0-9]+$)[a-zA-Z0-9-_]{1,128}$/, 'an alias name (not a version number, not $LATEST)'),
    region: z
      .string()
      .regex(/^[a-z]{2}(-[a-z]+)+-\d$/)
      .optional(),
  })
  .strict();

export const albWeightsTargetSchema = z
  .object({
    type: z.literal('albWeights'),
    /** A listener rule, or a listener whose default action carries the split: exactly one. */
    ruleArn: arn('elasticloadbalancing').optional(),
    listenerArn: arn('elasticloadbalancing').optional(),
    stableTargetGroupArn: arn('elasticloadbalancing'),
    canaryTargetGroupArn: arn('elasticloadbalancing'),
    /** Target-group stickiness on the forward action, in seconds (1–604800); absent: none. */
    stickinessSeconds: z.number().int().min(1).max(604_800).optional(),
    region: z
      .string()
      .regex(/^[a-z]{2}(-[a-z]+)+-\d$/)
      .optional(),
  })
  .strict()
  .superRefine((t, ctx) => {
    if ((t.ruleArn === undefined) === (t.listenerArn === undefined))
      ctx.addIssue({ code: 'custom', path: ['ruleArn'], message: 'give ruleArn or listenerArn, exactly one' });
    if (t.stableTargetGroupArn === t.canaryTargetGroupArn)
      ctx.addIssue({ code: 'custom', path: ['canaryTargetGroupArn'], message: 'must differ from stableTargetGroupArn' });
  });

export const webhookTargetSchema = z
  .object({
    type: z.literal('webhook'),
    /**
     * A receiver that keeps the split itself (docs/concepts/actuators-and-assignment.md#moving-traffic-actuators): GET answers
     * what it carries, POST asks it to carry a new state. The operator's
     * outbound allow-list must name its origin.
     */
    url: z
      .string()
      .max(2_048)
      .url()
      .refine((u) => /^https?:\/\//i.test(u), 'must be an http(s) URL'),
    /** A credential of the operator's outbound configuration bound to the url's origin: hmac signs each request; bearer or basic authorize it. */
    credential: z
      .string()
      .regex(/^[A-Za-z0-9_.:-]{1,64}$/, "the name of a credential in the operator's outbound configuration")
      .optional(),
    timeoutSeconds: z.number().int().min(1).max(60).default(10),
  })
  .strict();

export const targetSchema = z.discriminatedUnion('type', [nginxTargetSchema, lambdaAliasTargetSchema, albWeightsTargetSchema, webhookTargetSchema]);
export type TargetConfig = z.output<typeof targetSchema>;
/** A target as an operator writes it (a targets file, the `targets` a node takes): the schema's input. */
export type TargetInput = z.input<typeof targetSchema>;
export type NginxTarget = z.output<typeof nginxTargetSchema>;
export type LambdaAliasTarget = z.output<typeof lambdaAliasTargetSchema>;
export type AlbWeightsTarget = z.output<typeof albWeightsTargetSchema>;
export type WebhookTarget = z.output<typeof webhookTargetSchema>;

export const targetsSchema = z
  .record(z.string().regex(TARGET_NAME, 'a target name: lower-case letters, digits and - (at most 63)'), targetSchema)
  .refine((t) => Object.keys(t).length <= 64, 'at most 64 targets');
export type TargetsConfig = Readonly<Record<string, TargetConfig>>;

/** The operator's targets, validated; ConfigError naming every bad field otherwise. */
export function parseTargets(input: unknown): TargetsConfig {
  return parseConfig('actuation targets', targetsSchema, input ?? {});
}

/**
 * Why the operator's outbound policy refuses a webhook target (its origin is
 * not allow-listed, or its credential is bound elsewhere): one line each,
 * checked when a process starts, so a target that could never be reached is
 * a configuration error rather than a rollout that fails at its first stage.
 */
export function targetOutboundIssues(
  targets: TargetsConfig,
  policy: { refuseUrl(url: string, field: string): string | null; refuseCredential(name: string, url: string, field: string): string | null },
): string[] {
  const out: string[] = [];
  for (const [name, t] of Object.entries(targets)) {
    if (t.type !== 'webhook') continue;
    const refused =
      policy.refuseUrl(t.url, `${name}.url`) ?? (t.credential === undefined ? null : policy.refuseCredential(t.credential, t.url, `${name}.credential`));
    if (refused) out.push(refused);
  }
  return out;
}

/** Why `version` cannot be a rollout's new version on a Lambda alias; empty when it can. */
export function lambdaVersionIssues(newVersion: string): string[] {
  if (newVersion.toUpperCase() === '$LATEST') return ['$LATEST is not a published version: a Lambda alias splits traffic between published versions only'];
  if (!/^[1-9][0-9]{0,19}$/.test(newVersion))
    return [`${JSON.stringify(newVersion.slice(0, 40))} is not a published Lambda version (a version number, e.g. "3")`];
  return [];
}

/**
 * What a spec asks of targets that cannot be done: a target the operator has
 * not declared, or a new version a Lambda alias cannot carry (published
 * versions only). One `field: why` line each, checked when a spec is accepted.
 */
export function actuationIssues(
  spec: { readonly actuators?: readonly string[]; readonly target: { readonly version: string; readonly stableVersion?: string } },
  targets: TargetsConfig,
): string[] {
  const out: string[] = [];
  spec.actuators?.forEach((name, i) => {
    const t = own(targets, name);
    if (!t) {
      const known = Object.keys(targets);
      out.push(`actuators.${i}: no target named ${name} is declared${known.length ? ` (declared: ${known.join(', ')})` : ' (none are)'}`);
      return;
    }
    if (t.type === 'lambdaAlias') {
      for (const issue of lambdaVersionIssues(spec.target.version)) out.push(`target.version: ${issue} (target ${name} is a Lambda alias)`);
      if (spec.target.stableVersion !== undefined && spec.target.stableVersion === spec.target.version)
        out.push('target.stableVersion: the same as target.version; an alias splits between two versions');
    }
  });
  return [...new Set(out)];
}
