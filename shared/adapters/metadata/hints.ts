import { NoticeListeners, type ComputeHint, type PreemptionNotice } from '../../drain/compute-hint.js';
import { errorMessage, silentLogger, type Logger } from '../../log.js';

/**
 * Preemption notices from the instance metadata, read by the worker itself:
 * AWS IMDSv2 (`spot/instance-action`, `events/recommendations/rebalance`) and
 * GCP's `instance/preempted` flag.
 */

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
  private readonly listeners = new NoticeListeners();
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
      const res = await this.fetch(`${this.endpoint}/latest/api/token`, {
        method: 'PUT',
        headers: { 'x-aws-ec2-metadata-token-ttl-seconds': '21600' },
        signal: AbortSignal.timeout(2_000),
      });
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
  private readonly listeners = new NoticeListeners();
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
    const res = await (o.fetchImpl ?? fetch)(`${endpoint}/computeMetadata/v1/instance/id`, {
      headers: { 'metadata-flavor': 'Google' },
      signal: AbortSignal.timeout(2_000),
    });
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
          const res = await this.fetch(`${this.endpoint}/computeMetadata/v1/instance/preempted?wait_for_change=true`, {
            headers: { 'metadata-flavor': 'Google' },
            signal,
          });
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
