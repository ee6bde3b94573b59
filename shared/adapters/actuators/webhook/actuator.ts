import {
  outranks,
  parseStamp,
  sameReading,
  stampText,
  TargetMovedError,
  TargetRefusedError,
  type Actuator,
  type Desired,
  type Observed,
  type Stamp,
} from '../../../actuation/port.js';
import type { WebhookTarget } from '../../../actuation/targets.js';
import { OutboundRefusedError, type OutboundPolicy } from '../../../outbound/policy.js';
import { OperatorSecrets, type SecretSource } from '../../../outbound/secrets.js';
import { deadline } from '../../../rollout/gate-reader.js';
import { credentialHeaders, cutSent } from '../../http/credentials.js';
import { reason } from '../../http/webhook.js';
import type { OutboundClient } from '../../http/outbound.js';

/**
 * A target that keeps the split itself, reached over HTTP: a feature-flag
 * service, a service mesh's controller, anything with an API. The receiver
 * keeps one state and answers it (docs/concepts/actuators-and-assignment.md#moving-traffic-actuators, "The webhook protocol"):
 *
 *   GET  <url>  → 200 {"percent": 0–100, "final": bool, "stamp": "<line>"|null,
 *                      "revision"?: "<opaque>", "detail"?: "...", "foreign"?: "..."}
 *   POST <url>  {rolloutId, attempt, stage, percent, final, newVersion, version,
 *                epoch, stamp, expectedRevision, idempotencyKey, sentAt}
 *               → 2xx with the state as GET answers it once the write is made;
 *                 409 or 412 when `expectedRevision` is not what it holds
 *                 (nothing changed); 400 or 422 when it refuses the content.
 *
 * A receiver that answers a `revision` gets conditioned writes, as a Lambda
 * alias does with its RevisionId; one that does not is re-read just before
 * the write and read back after it, as an ELBv2 rule is. The stamp is kept
 * verbatim by the receiver: it is how we know the state is ours, of which
 * leader, and of which state of the rollout. With an `hmac` credential every
 * request is signed as hooks are (`Rollout-Signature`).
 */
export interface WebhookActuatorOptions {
  readonly outbound: OutboundClient & { readonly policy: OutboundPolicy };
  readonly secrets?: SecretSource;
  readonly now?: () => number;
}

/** What a receiver answers: its state, as GET returns it. */
interface ReceiverState {
  readonly percent: number;
  readonly final: boolean;
  readonly stamp: string | null;
  readonly revision?: string;
  readonly detail?: string;
  readonly foreign?: string;
}

export class WebhookActuator implements Actuator {
  readonly kind = 'webhook' as const;
  private readonly secrets: SecretSource;
  private readonly now: () => number;

  constructor(
    readonly target: string,
    private readonly config: WebhookTarget,
    private readonly o: WebhookActuatorOptions,
  ) {
    this.secrets = o.secrets ?? new OperatorSecrets();
    this.now = o.now ?? Date.now;
  }

  async read(_newVersion: string): Promise<Observed> {
    const res = await this.call('GET', '');
    if (res.status !== 200) throw new Error(`${this.target}: GET answered HTTP ${res.status} ${res.text.slice(0, 200)}`.trim());
    return this.observe(res.text, 'GET');
  }

  async write(desired: Desired, stamp: Stamp, observed: Observed): Promise<Observed> {
    if (observed.revision === undefined) {
      // No revision to condition on: re-read, and write only on what the caller decided on.
      const current = await this.read(desired.newVersion);
      const why = outranks(current.stamp, stamp);
      if (why) throw new TargetMovedError(this.target, why);
      if (!sameReading(current, observed)) throw new TargetMovedError(this.target, `read as ${observed.detail}, now ${current.detail}`);
    }
    const body = JSON.stringify({
      rolloutId: desired.rolloutId,
      attempt: desired.attempt,
      stage: desired.stage,
      percent: desired.percent,
      final: desired.final,
      newVersion: desired.newVersion,
      version: desired.version,
      epoch: stamp.epoch,
      stamp: stampText(stamp),
      expectedRevision: observed.revision ?? null,
      idempotencyKey: `${desired.rolloutId}:${desired.attempt}:${desired.stage ?? '-'}:actuate:${desired.version}`,
      sentAt: new Date(this.now()).toISOString(),
    });
    const res = await this.call('POST', body, observed.revision);
    if (res.status === 409 || res.status === 412) throw new TargetMovedError(this.target, `HTTP ${res.status}: ${res.text.slice(0, 200)}`);
    if (res.status === 400 || res.status === 422) throw new TargetRefusedError(this.target, `HTTP ${res.status}: ${res.text.slice(0, 200)}`);
    if (res.status < 200 || res.status >= 300) throw new Error(`${this.target}: POST answered HTTP ${res.status} ${res.text.slice(0, 200)}`.trim());
    return this.observe(res.text, 'POST');
  }

  private async call(method: 'GET' | 'POST', body: string, revision?: string): Promise<{ status: number; text: string }> {
    const sent: string[] = [];
    const { policy } = this.o.outbound;
    const { url, credential } = this.config;
    try {
      // Checked at every call: the operator's list may have changed since the process started.
      const refused =
        policy.refuseUrl(url, `target ${this.target} url`) ??
        (credential === undefined ? null : policy.refuseCredential(credential, url, `target ${this.target} credential`));
      if (refused) throw new OutboundRefusedError(refused);
      const base: Record<string, string> = {
        accept: 'application/json',
        ...(method === 'POST' ? { 'content-type': 'application/json' } : {}),
        ...(revision !== undefined ? { 'if-match': JSON.stringify(revision) } : {}),
      };
      const headers = await credentialHeaders(
        credential === undefined ? null : policy.credential(credential),
        {
          secrets: this.secrets,
          body,
          headers: base,
          now: this.now(),
          accepts: ['hmac', 'bearer', 'basic'],
          refusal: `target ${this.target}: a webhook target takes an hmac, bearer or basic credential`,
        },
        sent,
      );
      const res = await deadline(this.config.timeoutSeconds * 1000, undefined, (signal) =>
        this.o.outbound.request({ url, method, headers, ...(method === 'POST' ? { body } : {}), signal }),
      );
      return { status: res.status, text: cutSent(res.text, sent) };
    } catch (err) {
      throw new Error(cutSent(`${this.target}: ${method} ${safeOrigin(url)}: ${reason(err)}`, sent));
    }
  }

  private observe(text: string, method: string): Observed {
    const state = receiverState(text);
    if (typeof state === 'string') throw new Error(`${this.target}: ${method} answered ${state}`);
    const stamp = parseStamp(state.stamp);
    const detail = `${this.config.url}: ${state.final ? 'final' : `${state.percent}%`}${state.stamp ? `, ${stamp ? 'stamped' : `stamp not ours: ${state.stamp.slice(0, 80)}`}` : ', no stamp'}${state.detail ? ` (${state.detail.slice(0, 200)})` : ''}`;
    return {
      percent: state.percent,
      final: state.final,
      stamp,
      detail,
      ...(state.revision !== undefined ? { revision: state.revision } : {}),
      ...(state.foreign ? { foreignSplit: state.foreign.slice(0, 200) } : {}),
    };
  }
}

/** A receiver's answer, checked; a string saying what is wrong with it otherwise. */
function receiverState(text: string): ReceiverState | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return `no JSON state: ${JSON.stringify(text.slice(0, 120))}`;
  }
  if (typeof v !== 'object' || v === null) return 'a state that is not a JSON object';
  const o = v as Record<string, unknown>;
  if (typeof o.percent !== 'number' || !Number.isFinite(o.percent) || o.percent < 0 || o.percent > 100)
    return `a state whose percent is not a number within 0–100 (${JSON.stringify(o.percent)})`;
  if (typeof o.final !== 'boolean') return 'a state without a boolean final';
  if (o.stamp !== null && o.stamp !== undefined && typeof o.stamp !== 'string') return 'a state whose stamp is not a string or null';
  const opt = (k: 'revision' | 'detail' | 'foreign') => (typeof o[k] === 'string' ? { [k]: o[k] } : {});
  return { percent: o.percent, final: o.final, stamp: o.stamp ?? null, ...opt('revision'), ...opt('detail'), ...opt('foreign') };
}

function safeOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'an invalid URL';
  }
}
