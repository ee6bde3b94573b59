import { isIP } from 'node:net';
import { z } from 'zod';
import { parseConfig } from '../config.js';
import { own } from '../own.js';

/**
 * What a spec may make us do outside the process, decided by the operator
 * (DESIGN.md "Trust boundaries"). A spec is data from a user: it may name an
 * origin the operator allow-listed and a credential the operator bound to
 * that origin, nothing else. It never names an environment variable, a file
 * or a host the operator did not name first.
 *
 *   origins      exact origins (scheme, host, port) requests may go to
 *   credentials  a name a spec uses → { the origin it is bound to, how the
 *                secret is sent, where the operator keeps it }
 *
 * Addresses: a host is resolved before connecting and the connection goes
 * to the address that was checked (no second lookup a DNS answer could
 * change). Loopback, link-local (the instance metadata service among them),
 * unspecified and IPv4-mapped forms of those are refused unless the origin
 * names that very address (`http://127.0.0.1:9090`): allow-listing a name is
 * never enough to reach them.
 *
 * Guarantees: a request to an origin outside the list, or a credential sent
 * to any origin but its own, is refused before a socket opens. Non-guarantees:
 * what an allow-listed origin does with a request is its own business; the
 * list is only as narrow as the operator writes it.
 */

const ORIGIN_PATTERN = /^https?:\/\/[^/?#@]+$/i;

/** `scheme://host[:port]`, lower-cased, the default port dropped: the form origins are compared in. */
export function originOf(url: string | URL): string {
  const u = typeof url === 'string' ? new URL(url) : url;
  return u.origin.toLowerCase();
}

const originSchema = z
  .string()
  .max(512)
  .regex(ORIGIN_PATTERN, 'an origin: http(s)://host[:port], no path, query or user')
  .transform((o, ctx) => {
    try {
      return originOf(o);
    } catch {
      ctx.addIssue({ code: 'custom', message: `not a URL: ${o}` });
      return z.NEVER;
    }
  });

/** Where the operator keeps a secret: never in a spec. */
export const secretRefSchema = z.union([
  z.object({ env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'an environment variable name') }).strict(),
  z.object({ file: z.string().min(1).max(4_096) }).strict(),
  /** AWS Secrets Manager: an ARN or name; a JSON secret is read at `key` when given. */
  z.object({ secretsManager: z.string().min(1).max(2_048), key: z.string().min(1).max(256).optional() }).strict(),
]);
export type SecretRef = z.output<typeof secretRefSchema>;

const AMP_ORIGIN = /^https:\/\/aps-workspaces\.([a-z]{2}(?:-[a-z]+)+-\d{1,2})\.amazonaws\.com$/;

export const credentialSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('basic'), origin: originSchema, username: z.string().min(1).max(256), password: secretRefSchema }).strict(),
  z.object({ type: z.literal('bearer'), origin: originSchema, token: secretRefSchema }).strict(),
  /** Signs webhook hooks' bodies (`Rollout-Signature: k=<keyId>,t=…,v1=…`, as signed signals are): the secret never leaves us. */
  z
    .object({
      type: z.literal('hmac'),
      origin: originSchema,
      keyId: z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'letters, digits, _ . : - (at most 64)'),
      secret: secretRefSchema,
    })
    .strict(),
  /** Amazon Managed Service for Prometheus, signed with the process's AWS identity: for `aps` at its own endpoint only. */
  z
    .object({ type: z.literal('sigv4'), origin: originSchema, region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d{1,2}$/, 'an AWS region') })
    .strict()
    .superRefine((c, ctx) => {
      const m = AMP_ORIGIN.exec(c.origin);
      if (!m)
        ctx.addIssue({
          code: 'custom',
          path: ['origin'],
          message: 'SigV4 signs only for Amazon Managed Service for Prometheus: https://aps-workspaces.<region>.amazonaws.com',
        });
      else if (m[1] !== c.region) ctx.addIssue({ code: 'custom', path: ['region'], message: `must be the origin's region, ${m[1]}` });
    }),
]);
export type Credential = z.output<typeof credentialSchema>;

export const CREDENTIAL_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;

export const outboundConfigSchema = z
  .object({
    origins: z.array(originSchema).max(256).default([]),
    credentials: z.record(z.string().regex(CREDENTIAL_NAME, 'letters, digits, _ . : - (at most 64)'), credentialSchema).default({}),
  })
  .strict()
  .superRefine((c, ctx) => {
    const origins = new Set(c.origins);
    for (const [name, cred] of Object.entries(c.credentials)) {
      if (!origins.has(cred.origin))
        ctx.addIssue({
          code: 'custom',
          path: ['credentials', name, 'origin'],
          message: `${cred.origin} is not in origins: a credential is sent only to an allowed origin`,
        });
    }
  });
export type OutboundConfigInput = z.input<typeof outboundConfigSchema>;

/** Why a request or a spec was refused, naming the field. */
export class OutboundRefusedError extends Error {
  override readonly name = 'OutboundRefusedError';
}

/** The addresses a name must never lead to, unless the origin names the address itself. */
export function forbiddenAddress(address: string): string | null {
  const v4 = mappedV4(address) ?? (isIP(address) === 4 ? address : null);
  if (v4) {
    const [a, b] = v4.split('.').map(Number) as [number, number];
    if (a === 127) return 'a loopback address';
    if (a === 169 && b === 254) return 'a link-local address (the instance metadata service among them)';
    if (a === 0) return 'an unspecified address';
    return null;
  }
  if (isIP(address) !== 6) return 'not an IP address';
  const x = address.toLowerCase();
  if (x === '::1') return 'a loopback address';
  if (x === '::') return 'an unspecified address';
  if (/^fe[89ab][0-9a-f]?:/.test(x)) return 'a link-local address';
  if (x === 'fd00:ec2::254') return 'the instance metadata service';
  return null;
}

/** `::ffff:127.0.0.1` (and its hex form) as the IPv4 address it maps. */
function mappedV4(address: string): string | null {
  const x = address.toLowerCase();
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(x);
  if (dotted) return dotted[1]!;
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(x);
  if (!hex) return null;
  const hi = Number.parseInt(hex[1]!, 16);
  const lo = Number.parseInt(hex[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** A host as written in a URL, without IPv6 brackets. */
function bare(hostname: string): string {
  return hostname.replace(/^\[(.*)\]$/, '$1');
}

export class OutboundPolicy {
  private readonly origins: ReadonlySet<string>;
  readonly credentials: Readonly<Record<string, Credential>>;

  constructor(input: OutboundConfigInput = {}) {
    const c = parseConfig('outbound', outboundConfigSchema, input);
    this.origins = new Set(c.origins);
    this.credentials = c.credentials;
  }

  /** Nothing allowed: what a process gets when its operator configured no outbound requests. */
  static none(): OutboundPolicy {
    return new OutboundPolicy();
  }

  get allowedOrigins(): readonly string[] {
    return [...this.origins];
  }

  /** Why a request to `url` may not be made (null: it may). `field` names where the URL came from. */
  refuseUrl(url: string, field: string): string | null {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return `${field}: not a URL`;
    }
    if (u.username || u.password) return `${field}: credentials in the URL are not sent; name a credential the operator bound to the origin`;
    const origin = originOf(u);
    if (!this.origins.has(origin))
      return `${field}: ${origin} is not an allowed origin (the operator's outbound configuration lists ${this.origins.size ? [...this.origins].join(', ') : 'none'})`;
    return null;
  }

  /** Why `credential` may not be sent to `url` (null: it may). */
  refuseCredential(name: string, url: string, field: string): string | null {
    const cred = own(this.credentials, name);
    if (!cred) return `${field}: no credential named "${name}" in the operator's outbound configuration`;
    if (cred.origin !== originOf(url)) return `${field}: credential "${name}" is bound to ${cred.origin}, not ${originOf(url)}`;
    return null;
  }

  credential(name: string): Credential {
    const cred = own(this.credentials, name);
    if (!cred) throw new OutboundRefusedError(`no credential named "${name}"`);
    return cred;
  }

  /**
   * Why a connection for `url` may not go to `address`, an address its host
   * resolved to (null: it may). An origin that names an address literally
   * reaches it, whatever it is; a name never reaches a forbidden one.
   */
  refuseAddress(url: URL, address: string): string | null {
    const host = bare(url.hostname);
    if (isIP(host) && host === address) return null;
    const why = forbiddenAddress(address);
    return why ? `${url.hostname} resolved to ${address}, ${why}; allow-list the address itself to reach it` : null;
  }
}
