import { z } from 'zod';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import type { WorkerRegistry } from '../registry/registry.js';
import type { ComputeHint, PreemptionNotice } from './compute-hint.js';

/**
 * Where preemption notices come from, each adapted to the ComputeHint port:
 *  - the EventBridge events (read by the drain Lambda, which asks the workers
 *    of the instance to drain through the registry: `RegistryHint`);
 *  - the instance metadata, read by the worker itself: AWS IMDSv2
 *    (`spot/instance-action`, `events/recommendations/rebalance`) and GCP's
 *    `instance/preempted` flag.
 */

export const SPOT_INTERRUPTION = 'EC2 Spot Instance Interruption Warning';
export const REBALANCE_RECOMMENDATION = 'EC2 Instance Rebalance Recommendation';

/** What EC2 instance ids look like: `i-` and 8 (older) or 17 lower-case hex digits. Anything else never names one of our workers. */
export const EC2_INSTANCE_ID = /^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$/;

const ec2Event = z.object({
  source: z.literal('aws.ec2'),
  'detail-type': z.enum([SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION]),
  time: z.string().datetime({ offset: true }),
  detail: z.object({ 'instance-id': z.string().regex(EC2_INSTANCE_ID, 'not an EC2 instance id (i- followed by 8 or 17 hex digits)') }).passthrough(),
});

export class InvalidNoticeError extends Error {
  override readonly name = 'InvalidNoticeError';
}

/**
 * An EventBridge spot event → a notice; a malformed event is refused with the
 * reason (it goes to the target's DLQ). The drain deadline counts from
 * `noticeAt`: the event's time, unless that is later than our receipt — a
 * notice stamped in the future must not give the drain more time than the
 * cloud does.
 */
export function noticeFromEvent(event: unknown, receivedAt: number): PreemptionNotice & { noticeAt: number } {
  const parsed = ec2Event.safeParse(event);
  if (!parsed.success) {
    throw new InvalidNoticeError(`not an EC2 spot notice: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'event'}: ${i.message}`).join('; ')}`);
  }
  const e = parsed.data;
  return {
    provider: 'aws',
    instanceId: e.detail['instance-id'],
    kind: e['detail-type'] === SPOT_INTERRUPTION ? 'interruption' : 'rebalance',
    receivedAt,
    noticeAt: Math.min(Date.parse(e.time), receivedAt),
  };
}

class Listeners {
  private readonly set = new Set<(n: PreemptionNotice) => void>();
  private fired = false;

  add(l: (n: PreemptionNotice) => void): () => void {
    this.set.add(l);
    return () => this.set.delete(l);
  }

  /** Once per hint: a drain runs once. */
  fire(n: PreemptionNotice): void {
    if (this.fired) return;
    this.fired = true;
    for (const l of this.set) l(n);
  }
}

/**
 * The worker learns of a drain request through its registry heartbeat (the
 * drain Lambda marked it draining). The notice time is the cloud's, so the
 * deadline counts from when the notice was issued.
 */
export class RegistryHint implements ComputeHint {
  private readonly listeners = new Listeners();

  onPreemption(listener: (notice: PreemptionNotice) => void): () => void {
    return this.listeners.add(listener);
  }

  /** Feed each heartbeat's answer here. */
  observe(record: Awaited<ReturnType<WorkerRegistry['heartbeat']>>): void {
    if (record?.state === 'draining' && record.drain) {
      this.listeners.fire({ provider: record.drain.provider, instanceId: record.instanceId, kind: record.drain.kind, receivedAt: record.drain.noticeAt });
    }
  }
}

export interface MetadataHintOptions {
  /** Base URL of the metadata service (tests point it at a local server). */
  endpoint?: string;
  pollMs?: number;
  logger?: Logger;
  fetchImpl?: typeof fetch;
}

/**
 * AWS instance metadata (IMDSv2): polls `spot/instance-action` (an
 * interruption, two minutes ahead) and `events/recommendations/rebalance`
 * every `pollMs` (AWS suggests every 5 s). 404 means no notice.
 */
export class Ec2MetadataHint implements ComputeHint {
  private readonly listeners = new Listeners();
  private readonly endpoint: string;
  private readonly pollMs: number;
  private readonly logger: Logger;
  private readonly fetch: typeof fetch;
  private timer: NodeJS.Timeout | null = null;
  private token: { value: string; until: number } | null = null;

  constructor(
    private readonly instanceId: string,
    o: MetadataHintOptions = {},
  ) {
    this.endpoint = (o.endpoint ?? 'http://169.254.169.254').replace(/\/$/, '');
    this.pollMs = o.pollMs ?? 5_000;
    this.logger = o.logger ?? silentLogger;
    this.fetch = o.fetchImpl ?? fetch;
  }

  /** The instance id from the metadata service (for `--instance-id auto`). */
  static async instanceId(o: MetadataHintOptions = {}): Promise<string> {
    const hint = new Ec2MetadataHint('', o);
    const res = await hint.get('/latest/meta-data/instance-id');
    if (!res.ok) throw new Error(`EC2 instance metadata: instance-id: HTTP ${res.status}`);
    return (await res.text()).trim();
  }

  onPreemption(listener: (notice: PreemptionNotice) => void): () => void {
    return this.listeners.add(listener);
  }

  start(): this {
    const tick = () => {
      void this.check()
        .catch((err: unknown) => this.logger.warn('instance metadata unreachable', { error: errorMessage(err) }))
        .finally(() => {
          if (this.timer) this.timer = setTimeout(tick, this.pollMs);
        });
    };
    this.timer = setTimeout(tick, 0);
    return this;
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** One look at both notices. */
  async check(): Promise<PreemptionNotice | null> {
    for (const [path, kind] of [
      ['/latest/meta-data/spot/instance-action', 'interruption'],
      ['/latest/meta-data/events/recommendations/rebalance', 'rebalance'],
    ] as const) {
      const res = await this.get(path);
      if (res.status === 404) continue;
      if (!res.ok) throw new Error(`EC2 instance metadata ${path}: HTTP ${res.status}`);
      await res.text();
      const notice: PreemptionNotice = { provider: 'aws', instanceId: this.instanceId, kind, receivedAt: Date.now() };
      this.listeners.fire(notice);
      return notice;
    }
    return null;
  }

  private async get(path: string): Promise<Response> {
    if (!this.token || this.token.until < Date.now()) {
      const res = await this.fetch(`${this.endpoint}/latest/api/token`, { method: 'PUT', headers: { 'x-aws-ec2-metadata-token-ttl-seconds': '21600' }, signal: AbortSignal.timeout(2_000) });
      if (!res.ok) throw new Error(`EC2 instance metadata token: HTTP ${res.status}`);
      this.token = { value: (await res.text()).trim(), until: Date.now() + 21_000_000 };
    }
    return this.fetch(`${this.endpoint}${path}`, { headers: { 'x-aws-ec2-metadata-token': this.token.value }, signal: AbortSignal.timeout(2_000) });
  }
}

/**
 * GCP: `instance/preempted` with `wait_for_change=true` hangs until the flag
 * changes, so the notice arrives as it is set (30 s ahead), no polling storm.
 */
export class GcpMetadataHint implements ComputeHint {
  private readonly listeners = new Listeners();
  private readonly endpoint: string;
  private readonly logger: Logger;
  private readonly fetch: typeof fetch;
  private readonly retryMs: number;
  private abort: AbortController | null = null;

  constructor(
    private readonly instanceId: string,
    o: MetadataHintOptions = {},
  ) {
    this.endpoint = (o.endpoint ?? 'http://metadata.google.internal').replace(/\/$/, '');
    this.logger = o.logger ?? silentLogger;
    this.fetch = o.fetchImpl ?? fetch;
    this.retryMs = o.pollMs ?? 5_000;
  }

  static async instanceId(o: MetadataHintOptions = {}): Promise<string> {
    const endpoint = (o.endpoint ?? 'http://metadata.google.internal').replace(/\/$/, '');
    const res = await (o.fetchImpl ?? fetch)(`${endpoint}/computeMetadata/v1/instance/id`, { headers: { 'metadata-flavor': 'Google' }, signal: AbortSignal.timeout(2_000) });
    if (!res.ok) throw new Error(`GCP metadata: instance/id: HTTP ${res.status}`);
    return (await res.text()).trim();
  }

  onPreemption(listener: (notice: PreemptionNotice) => void): () => void {
    return this.listeners.add(listener);
  }

  start(): this {
    this.abort = new AbortController();
    const signal = this.abort.signal;
    void (async () => {
      while (!signal.aborted) {
        try {
          const res = await this.fetch(`${this.endpoint}/computeMetadata/v1/instance/preempted?wait_for_change=true`, { headers: { 'metadata-flavor': 'Google' }, signal });
          const body = (await res.text()).trim();
          if (!res.ok) throw new Error(`HTTP ${res.status}`);
          if (body === 'TRUE') {
            this.listeners.fire({ provider: 'gcp', instanceId: this.instanceId, kind: 'interruption', receivedAt: Date.now() });
            return;
          }
        } catch (err) {
          if (signal.aborted) return;
          this.logger.warn('GCP metadata unreachable', { error: errorMessage(err) });
          await new Promise((r) => setTimeout(r, this.retryMs));
        }
      }
    })();
    return this;
  }

  stop(): void {
    this.abort?.abort();
  }
}

