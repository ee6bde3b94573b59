import { mapLimit } from '../../concurrency.js';
import { OutboundPolicy, OutboundRefusedError, type Credential } from '../../outbound/policy.js';
import { OperatorSecrets, SecretNotFoundError, type SecretSource } from '../../outbound/secrets.js';
import type { WebhookGate } from '../../rollout/gate-spec.js';
import { deadline, type GateContext, type GateProvider } from '../../rollout/gate-reader.js';
import type { ProviderResult } from '../../rollout/gates.js';
import { credentialHeaders, scrubbed } from './credentials.js';
import { OutboundHttp, type OutboundClient } from './outbound.js';

/**
 * Hooks (webhook gates): one JSON POST per due hook, through the operator's
 * outbound policy (an allow-listed origin, the credential bound to it), each
 * within its gate's timeout. The body says which rollout, attempt, stage and
 * leader asks, and carries an idempotency key a receiver can deduplicate on
 * (`<rolloutId>:<attempt>:<stage>:<hook>`: every reading of one hook for one
 * stage is the same question). With an `hmac` credential the body is signed
 * as signed signals are (`Rollout-Signature: k=<keyId>,t=<unix s>,v1=<hex
 * HMAC-SHA256(secret, "<t>.<body>")>`), so a receiver verifies it came from
 * us and is fresh. Only the status is judged; the answer is kept (clipped,
 * with anything we sent cut out) for the reading.
 */
export interface WebhookProviderOptions {
  readonly concurrency?: number;
  readonly outbound?: OutboundClient & { readonly policy: OutboundPolicy };
  readonly secrets?: SecretSource;
  readonly now?: () => number;
}

export interface HookPayload {
  readonly hook: WebhookGate['hook'];
  readonly gate: string;
  readonly rolloutId: string;
  readonly attempt: number;
  readonly stage: GateContext['stage'];
  readonly epoch: number | null;
  readonly service: string;
  readonly newVersion: string;
  readonly stableVersion: string | null;
  readonly labels: Readonly<Record<string, string>>;
  readonly metadata: Readonly<Record<string, string>>;
  readonly idempotencyKey: string;
  /** post-rollout: how the rollout ended. */
  readonly outcome?: 'completed' | 'rolled_back' | 'aborted';
  /** When we sent it, ISO 8601. */
  readonly sentAt: string;
}

export class WebhookProvider implements GateProvider<WebhookGate> {
  private readonly concurrency: number;
  private readonly outbound: OutboundClient & { readonly policy: OutboundPolicy };
  private readonly secrets: SecretSource;
  private readonly now: () => number;

  constructor(o: WebhookProviderOptions = {}) {
    this.concurrency = o.concurrency ?? 16;
    this.outbound = o.outbound ?? new OutboundHttp(OutboundPolicy.none());
    this.secrets = o.secrets ?? new OperatorSecrets();
    this.now = o.now ?? Date.now;
  }

  read(gates: readonly WebhookGate[], o: { readonly signal: AbortSignal; readonly contexts: readonly GateContext[] }): Promise<ProviderResult[]> {
    return mapLimit(
      gates.map((g, i) => [g, o.contexts[i]] as const),
      this.concurrency,
      ([g, ctx]) => (ctx ? this.call(g, ctx, o.signal) : Promise.resolve<ProviderResult>({ kind: 'error', message: 'no rollout to ask about', answer: '' })),
    );
  }

  private async call(gate: WebhookGate, ctx: GateContext, signal: AbortSignal): Promise<ProviderResult> {
    const sent: string[] = [];
    const host = safeHost(gate.url);
    try {
      const policy = this.outbound.policy;
      // Checked again at every call: the operator's list may have changed since the spec was accepted.
      const refused =
        policy.refuseUrl(gate.url, `hook ${gate.name} url`) ??
        (gate.credential === undefined ? null : policy.refuseCredential(gate.credential, gate.url, `hook ${gate.name} credential`));
      if (refused) throw new OutboundRefusedError(refused);
      const payload: HookPayload = {
        hook: gate.hook,
        gate: gate.name,
        rolloutId: ctx.rolloutId,
        attempt: ctx.attempt,
        stage: ctx.stage,
        epoch: ctx.epoch,
        service: ctx.service,
        newVersion: ctx.newVersion,
        stableVersion: ctx.stableVersion,
        labels: ctx.labels,
        metadata: gate.metadata ?? {},
        idempotencyKey: `${ctx.rolloutId}:${ctx.attempt}:${ctx.stage.index}:${gate.hook}`,
        ...(ctx.outcome ? { outcome: ctx.outcome } : {}),
        sentAt: new Date(this.now()).toISOString(),
      };
      const body = JSON.stringify(payload);
      const headers = await this.authorized(
        gate.credential === undefined ? null : policy.credential(gate.credential),
        body,
        { 'content-type': 'application/json', accept: 'application/json', 'idempotency-key': payload.idempotencyKey },
        sent,
      );
      const res = await deadline(gate.timeoutSeconds * 1000, signal, (s) => this.outbound.request({ url: gate.url, method: 'POST', headers, body, signal: s }));
      return scrubbed({ kind: 'http', status: res.status, answer: `HTTP ${res.status} ${res.text}`.trim() }, sent);
    } catch (err) {
      return scrubbed({ kind: 'error', message: `${gate.hook} hook ${host}: ${reason(err)}`, answer: '' }, sent);
    }
  }

  private authorized(cred: Credential | null, body: string, headers: Record<string, string>, sent: string[]): Promise<Record<string, string>> {
    return credentialHeaders(
      cred,
      {
        secrets: this.secrets,
        body,
        headers,
        now: this.now(),
        accepts: ['hmac', 'bearer', 'basic'],
        refusal: 'a sigv4 credential signs for Amazon Managed Service for Prometheus only; a hook takes an hmac, bearer or basic one',
      },
      sent,
    );
  }
}

export function safeHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'an invalid URL';
  }
}

export function reason(err: unknown): string {
  if (err instanceof SecretNotFoundError) return `credential: ${err.message}`;
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const base = err instanceof Error ? err.message : String(err);
  return cause?.code ? `${base} (${cause.code})` : base;
}
