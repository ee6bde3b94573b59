import type { RolloutJson } from '../api/rollout-json.js';
import type { Command } from '../rollout/commands.js';
import type { Assignment, RolloutTraffic } from '../rollout/assignment.js';
import type { RolloutState } from '../rollout/model.js';
import type { ItemState } from '../ledger/model.js';

export type { ItemState };
import { enqueueRun, type EnqueueOptions, type EnqueueReport, type EnqueueRunInput } from './producer.js';
import { call, UnreachableError, type Target } from './transport.js';

/**
 * A typed client for the control plane's HTTP API: a node (or nodes behind a
 * load balancer) or the deployed API (SigV4 with `awsRegion`). It keeps the
 * CLI's behaviour, since the CLI is built on it: a write carries an
 * Idempotency-Key kept across every retry, follows a follower's answer to
 * the leader once, and is retried while the answer is "try again" (an
 * election under way); a refusal is an ApiError with the status and the
 * body, whose `error` (and `issues`) say what was wrong.
 *
 *   const client = new RolloutClient({ url: 'http://127.0.0.1:8000', token: process.env.ROLLOUT_TOKEN });
 *   const { id } = await client.createRollout(spec);
 *   const ended = await client.waitForRollout(id, { timeoutMs: 30 * 60_000 });
 */
export type RolloutClientOptions = Target;

export interface CreatedRollout {
  readonly id: string;
  /** False: a rollout with this id and the same spec existed already (the call is idempotent on `id`). */
  readonly created: boolean;
}

export interface CommandResult {
  readonly transition: string;
  /** False: the rollout had moved on and nothing was written. */
  readonly applied: boolean;
  readonly stage: number | null;
  /** The event types the transition emitted (`ai.rollout.promoted`, …). */
  readonly events: readonly string[];
}

export interface AssignmentAnswer extends Assignment {
  readonly rolloutId: string;
  readonly entity: string;
}

export interface SignalResult {
  /** stored, stale (older than what is kept) or none (nothing to keep). */
  readonly stored: 'stored' | 'stale' | 'none';
  /** False when the node asked does not lead: the leader evaluates it within one tick. */
  readonly evaluated: boolean;
  readonly actions: readonly { readonly rolloutId: string; readonly transition: string; readonly applied: boolean }[];
}

export interface CreateRunInput {
  readonly items: readonly unknown[];
  readonly id?: string;
  readonly spec?: Readonly<Record<string, unknown>>;
  readonly shards?: number;
  readonly itemsPerSecond?: number;
}

export interface CreatedRun {
  readonly id: string;
  readonly created: boolean;
  /** Items in this request, and how many of them were new to the run. */
  readonly items: number;
  readonly added: number;
}

export interface RunJson {
  readonly id: string;
  readonly spec: Readonly<Record<string, unknown>>;
  readonly coordinatorEpoch: number;
  readonly createdAt: string;
  readonly shards: number | null;
  readonly counts: { readonly pending: number; readonly running: number; readonly done: number; readonly failed: number };
  readonly done: boolean;
  readonly throttled: { readonly at: string; readonly secondsAgo: number; readonly keyFamily: string; readonly requests: number } | null;
  readonly cancelled: RunCancelJson | null;
}

/** Who cancelled a run, when and why. */
export interface RunCancelJson {
  readonly at: string;
  readonly by: string;
  readonly reason: string | null;
}

/** What `cancelRun` answers. */
export interface CancelledRun {
  readonly id: string;
  readonly cancelled: RunCancelJson;
  /** false: it was cancelled before (that cancel is the one shown). */
  readonly first: boolean;
  /** The run's items as the cancel found them. */
  readonly counts: RunJson['counts'];
  /** On a node: Pending items left once its coordinator has passed, 0 when all are failed (null: not coordinated here; its next scans fail them). Absent on a replayed answer and in AWS. */
  readonly pendingLeft?: number | null;
}

export interface RunSummaryJson {
  readonly id: string;
  readonly spec: Readonly<Record<string, unknown>>;
  readonly createdAt: string;
  readonly coordinatorEpoch: number;
  readonly shards: number | null;
  readonly cancelled: RunCancelJson | null;
}

export interface RunsPage {
  readonly runs: readonly RunSummaryJson[];
  readonly next: string | null;
}

/** One item of a run as `GET /runs/{id}/items` shows it. */
export interface RunItemJson {
  readonly id: string;
  readonly state: ItemState;
  readonly payload: unknown;
  /** Done: what the worker returned. */
  readonly result: unknown;
  /** Failed (and a retried failure): why. */
  readonly error: string | null;
  readonly attempts: number;
  readonly worker: string | null;
  readonly claimedAt: string | null;
  readonly heartbeatAt: string | null;
}

export interface RunItemsPage {
  readonly runId: string;
  readonly items: readonly RunItemJson[];
  /** Pass as `cursor` for the next page; null when there is no more. */
  readonly next: string | null;
}

/** A rollout in a list (GET /rollouts?state=…): its row, without stages or signals. */
export interface RolloutSummaryJson {
  readonly id: string;
  readonly state: RolloutState;
  readonly attempt: number;
  readonly version: number;
  readonly service: string;
  readonly newVersion: string;
  readonly stableVersion: string | null;
  /** How many stages its spec has. */
  readonly stages: number;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly stateBy: string | null;
  readonly stateReason: string | null;
}

export interface RolloutsPage {
  readonly rollouts: readonly RolloutSummaryJson[];
  readonly next: string | null;
}

/** One transition of a rollout, as `GET /rollouts/{id}/history` lists it. */
export interface HistoryEntryJson {
  /** Orders a rollout's events (null on events stored before it existed). */
  readonly seq: number | null;
  /** The event: `ai.rollout.stage_promoted`, `ai.rollout.paused`, … */
  readonly type: string;
  readonly at: string;
  /** `promoter:<node>` for automatic steps, the caller's identity for commands. */
  readonly actor: string;
  readonly epoch: number;
  readonly attempt: number;
  readonly stage: { readonly index: number; readonly name: string; readonly percent: number } | null;
  readonly percent: number | null;
  readonly reason: string | null;
  readonly target?: string;
}

export interface LeaderJson {
  readonly leader_id: string;
  readonly term: number;
  readonly expires_at: string;
}

export interface ClusterStatusJson {
  readonly node_id: string;
  readonly is_leader: boolean;
  readonly leader: LeaderJson | null;
}

/** The states a rollout ends in. */
export const ENDED_STATES: readonly RolloutState[] = ['completed', 'rolled_back', 'aborted'];

/** waitForRollout gave up before the rollout ended. */
/** Errors a wait cannot outlast: no such rollout, a refused credential, a name that does not resolve, a refused first connection. */
function willNotHeal(err: unknown, everRead: boolean): boolean {
  const status = (err as { status?: unknown }).status;
  if (status === 404 || status === 401 || status === 403) return true;
  if (!(err instanceof UnreachableError)) return false;
  if (err.code === 'ENOTFOUND' || err.code === 'EAI_NONAME') return true;
  // Before any answer, a refused connection or a name the resolver cannot look up is a wrong URL (or no network)
  // far more often than a node restarting: say so now rather than wait out the timeout. After one, wait.
  return !everRead && (err.code === 'ECONNREFUSED' || err.code === 'EAI_AGAIN' || err.code === 'EAI_FAIL');
}

export class RolloutWaitTimeoutError extends Error {
  override readonly name = 'RolloutWaitTimeoutError';
  constructor(
    readonly rolloutId: string,
    readonly last: RolloutJson,
    ms: number,
  ) {
    super(`rollout ${rolloutId} had not ended after ${Math.round(ms / 1000)} s: ${last.state}${last.stateReason ? ` (${last.stateReason})` : ''}`);
  }
}

const seg = (s: string) => encodeURIComponent(s);

export interface ClusterHealthJson {
  readonly status: 'healthy' | 'degraded';
  readonly clustering: 'enabled' | 'disabled';
  readonly node_id: string;
  readonly state: string;
  readonly is_leader: boolean;
  readonly leader_id: string | null;
  readonly cluster_size?: number;
  readonly cluster_ready: boolean;
  /** reachable, or unreachable with why. */
  readonly store: string;
  readonly timestamp: number;
  readonly version: string;
}

export interface ClusterEventJson {
  readonly id: number;
  readonly node_id: string;
  readonly event_type: string;
  readonly event_data: unknown;
  readonly timestamp: string;
}

export class RolloutClient {
  constructor(readonly options: RolloutClientOptions) {}

  private get<T>(path: string): Promise<T> {
    return call(this.options, 'GET', path) as Promise<T>;
  }

  private post<T>(path: string, body: unknown, idempotencyKey?: string): Promise<T> {
    return (idempotencyKey === undefined ? call(this.options, 'POST', path, body) : call(this.options, 'POST', path, body, idempotencyKey)) as Promise<T>;
  }

  clusterStatus(): Promise<ClusterStatusJson> {
    return this.get('/cluster/status');
  }

  /** Liveness, and whether the store answers and a leader is known (open: no credential needed). */
  clusterHealth(): Promise<ClusterHealthJson> {
    return this.get('/cluster/health');
  }

  /** A node's newest cluster events (elections, joins, leaves), newest first. */
  async clusterEvents(o: { readonly limit?: number } = {}): Promise<readonly ClusterEventJson[]> {
    return (await this.get<{ events: ClusterEventJson[] }>(`/cluster/events${o.limit === undefined ? '' : `?limit=${o.limit}`}`)).events;
  }

  /** The API's OpenAPI 3.1 document, as the server serves it. */
  openApiDocument(): Promise<Record<string, unknown>> {
    return this.get('/openapi.json');
  }

  /** Who leads now; null when no leader is elected. */
  async leader(): Promise<LeaderJson | null> {
    return (await this.clusterStatus()).leader;
  }

  /** Create a rollout from a spec (validated by the server: a bad one is an ApiError 400 naming every field). Idempotent on `id`. */
  createRollout(spec: unknown, o: { readonly id?: string } = {}): Promise<CreatedRollout> {
    return this.post('/rollouts', { spec, ...(o.id !== undefined ? { id: o.id } : {}) });
  }

  async listRollouts(): Promise<readonly RolloutJson[]> {
    return (await this.get<{ rollouts: RolloutJson[] }>('/rollouts')).rollouts;
  }

  /** Every rollout (or those in `state`), newest first, a page of rows; pass `next` as `cursor` for the next page. */
  rolloutsPage(o: { readonly state?: RolloutState; readonly cursor?: string; readonly limit?: number } = {}): Promise<RolloutsPage> {
    const q = new URLSearchParams({ state: o.state ?? 'all' });
    if (o.cursor) q.set('cursor', o.cursor);
    if (o.limit !== undefined) q.set('limit', String(o.limit));
    return this.get(`/rollouts?${q.toString()}`);
  }

  getRollout(id: string): Promise<RolloutJson> {
    return this.get(`/rollouts/${seg(id)}`);
  }

  /** Every transition of the rollout, oldest first. */
  async rolloutHistory(id: string): Promise<readonly HistoryEntryJson[]> {
    return (await this.get<{ history: HistoryEntryJson[] }>(`/rollouts/${seg(id)}/history`)).history;
  }

  /** promote, promote-full, pause, resume, abort or retry; needs the leader (followed to it). */
  async command(id: string, command: Command, o: { readonly reason?: string; readonly idempotencyKey?: string } = {}): Promise<CommandResult> {
    const body = o.reason !== undefined ? { reason: o.reason } : {};
    return (await this.post<{ action: CommandResult }>(`/rollouts/${seg(id)}/${command}`, body, o.idempotencyKey)).action;
  }

  /** What assignment answers from: evaluate it in process with `assign(traffic, entity)`. */
  traffic(id: string): Promise<RolloutTraffic> {
    return this.get(`/rollouts/${seg(id)}/traffic`);
  }

  assignment(id: string, entity: string): Promise<AssignmentAnswer> {
    return this.get(`/rollouts/${seg(id)}/assignment?entity=${seg(entity)}`);
  }

  /** Up to the server's limit of entities in one request. */
  async assignments(id: string, entities: readonly string[]): Promise<readonly AssignmentAnswer[]> {
    if (entities.length === 1) return [await this.assignment(id, entities[0]!)];
    const q = entities.map((e) => `entity=${seg(e)}`).join('&');
    const res = await this.get<{ rolloutId: string; assignments: Omit<AssignmentAnswer, 'rolloutId'>[] }>(`/rollouts/${seg(id)}/assignment?${q}`);
    return res.assignments.map((a) => ({ rolloutId: res.rolloutId, ...a }));
  }

  /** A rollout signal (`rollout.metrics_reported`, `rollout.alarm_changed`, …) as the CLI's `events publish` sends it. */
  publishSignal(event: { readonly type: string } & Readonly<Record<string, unknown>>): Promise<SignalResult> {
    return this.post('/events', event);
  }

  createRun(input: CreateRunInput): Promise<CreatedRun> {
    return this.post('/runs', input);
  }

  /**
   * Any number of items into a run (created by the first request), in
   * requests of up to 10,000, paced to what the control plane accepts: fewer
   * requests in flight and a pause after each refusal, more while all are
   * accepted (producer.ts). Resolves once every item is stored; an
   * EnqueueError says how far it got, and sending every item again is safe.
   */
  enqueueRun(input: EnqueueRunInput, o: EnqueueOptions = {}): Promise<EnqueueReport> {
    // Each request is sent once: the producer resends what was refused, and slows down.
    const once = { ...this.options, retryWritesForMs: 0 };
    return enqueueRun((body, key) => call(once, 'POST', '/runs', body, key) as Promise<CreatedRun>, input, o);
  }

  /** Runs newest first, a page of records (`getRun` has each one's counts). */
  runsPage(o: { readonly cursor?: string; readonly limit?: number } = {}): Promise<RunsPage> {
    const q = new URLSearchParams();
    if (o.cursor) q.set('cursor', o.cursor);
    if (o.limit !== undefined) q.set('limit', String(o.limit));
    return this.get(`/runs${q.size ? `?${q.toString()}` : ''}`);
  }

  getRun(id: string): Promise<RunJson> {
    return this.get(`/runs/${seg(id)}`);
  }

  /**
   * Cancels a run: its Pending items end Failed (`cancelled: <reason> (by
   * <actor>)`), items already running end as they finish, and the run takes
   * no more items. Idempotent: a second cancel answers the first.
   */
  cancelRun(id: string, o: { readonly reason?: string; readonly idempotencyKey?: string } = {}): Promise<CancelledRun> {
    return this.post(`/runs/${seg(id)}/cancel`, o.reason !== undefined ? { reason: o.reason } : {}, o.idempotencyKey);
  }

  /** One page of a run's items (all, or those in `state`), with results and failure reasons. */
  runItems(id: string, o: { readonly state?: ItemState; readonly cursor?: string; readonly limit?: number } = {}): Promise<RunItemsPage> {
    const q = new URLSearchParams();
    if (o.state) q.set('state', o.state);
    if (o.cursor) q.set('cursor', o.cursor);
    if (o.limit !== undefined) q.set('limit', String(o.limit));
    return this.get(`/runs/${seg(id)}/items${q.size ? `?${q.toString()}` : ''}`);
  }

  /** Every item of a run (or those in `state`), page after page. */
  async *allRunItems(id: string, o: { readonly state?: ItemState; readonly pageSize?: number } = {}): AsyncGenerator<RunItemJson> {
    let cursor: string | undefined;
    do {
      const page = await this.runItems(id, { ...(o.state ? { state: o.state } : {}), ...(cursor ? { cursor } : {}), limit: o.pageSize ?? 500 });
      yield* page.items;
      cursor = page.next ?? undefined;
    } while (cursor);
  }

  /**
   * The rollout once it has ended (completed, rolled back or aborted), read
   * every `pollMs` (default 2 s); `onChange` sees each new state or stage.
   * RolloutWaitTimeoutError past `timeoutMs` (default: none). A read that
   * fails (no leader for a moment, a node restarting) is tried again at the
   * next poll, until the timeout, and `onError` sees each new failure as it
   * happens. What will not heal by waiting is thrown at once: a rollout that
   * does not exist (ApiError 404), a credential refused (401, 403), a name
   * that does not resolve, and, before any read succeeded, a refused
   * connection or a failed name lookup (a mistyped URL, not a node
   * restarting).
   */
  async waitForRollout(
    id: string,
    o: {
      readonly timeoutMs?: number;
      readonly pollMs?: number;
      readonly onChange?: (r: RolloutJson) => void;
      readonly onError?: (err: Error) => void;
      readonly signal?: AbortSignal;
    } = {},
  ): Promise<RolloutJson> {
    const started = Date.now();
    const pollMs = o.pollMs ?? 2_000;
    let last: RolloutJson | undefined;
    let failed: unknown;
    let seen = '';
    for (;;) {
      try {
        last = await this.getRollout(id);
        failed = undefined;
        const now = `${last.state} ${last.attempt} ${last.stages.map((s) => s.phase).join(',')}`;
        if (now !== seen) {
          seen = now;
          o.onChange?.(last);
        }
        if (ENDED_STATES.includes(last.state)) return last;
      } catch (err) {
        if (willNotHeal(err, last !== undefined)) throw err;
        if (!(failed instanceof Error) || (err as Error).message !== failed.message) o.onError?.(err as Error);
        failed = err;
      }
      if (o.timeoutMs !== undefined && Date.now() - started >= o.timeoutMs) {
        if (last === undefined) throw failed instanceof Error ? failed : new Error(String(failed));
        throw new RolloutWaitTimeoutError(id, last, o.timeoutMs);
      }
      const wait = o.timeoutMs === undefined ? pollMs : Math.min(pollMs, Math.max(0, started + o.timeoutMs - Date.now()));
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, wait);
        o.signal?.addEventListener('abort', () => (clearTimeout(t), reject(o.signal!.reason as Error)), { once: true });
      });
    }
  }
}
