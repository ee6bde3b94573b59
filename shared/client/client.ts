import type { Request, Result } from '../api/route.js';
import * as cluster from '../api/routes/cluster.js';
import * as node from '../api/routes/node.js';
import * as rollouts from '../api/routes/rollouts.js';
import * as runs from '../api/routes/runs.js';
import type { RolloutJson } from '../api/rollout-json.js';
import type { Command } from '../rollout/command-names.js';
import type { SignalInput } from '../rollout/inbound.js';
import type { RolloutSpec, RolloutSpecInput } from '../rollout/spec.js';
import type { RolloutTraffic } from '../rollout/assignment.js';
import type { RolloutState } from '../rollout/model.js';
import type { GateReading } from '../rollout/gates.js';
import { enqueueRun, type CreatedRun, type CreateRunInput, type EnqueueOptions, type EnqueueReport, type EnqueueRunInput } from './producer.js';
import { callRoute } from './route-call.js';

export type { CreatedRun, CreateRunInput } from './producer.js';
import { UnreachableError, type Target } from './transport.js';

/**
 * A typed client for the control plane's HTTP API: a node (or nodes behind a
 * load balancer) or the deployed API (SigV4 with `awsRegion`). It keeps the
 * CLI's behaviour, since the CLI is built on it: a write carries an
 * Idempotency-Key kept across every retry, follows a follower's answer to
 * the leader once, and is retried while the answer is "try again" (an
 * election under way); a refusal is an ApiError with the status and the
 * body, whose `error` (and `issues`) say what was wrong.
 *
 * What each call sends and what it resolves to are the types of its route's
 * schemas (api/routes/), the ones the server parses and answers with: the
 * types below are read off the routes, not restated.
 *
 *   const client = new RolloutClient({ url: 'http://127.0.0.1:8000', token: process.env.ROLLOUT_TOKEN });
 *   const { id } = await client.createRollout(spec);
 *   const ended = await client.waitForRollout(id, { timeoutMs: 30 * 60_000 });
 */
export type RolloutClientOptions = Target;

type CommandRoute = (typeof rollouts.commandRoutes)[number];

/** `created` false: a rollout with this id and the same spec existed already (the call is idempotent on `id`). */
export type CreatedRollout = Result<typeof rollouts.createRollout>;
/** What a command did: `applied` false when the rollout had moved on and nothing was written; `events`, the event types it emitted (`ai.rollout.promoted`, …). */
export type CommandResult = Result<CommandRoute>['action'];
/** One entity's assignment (assign() on the server), with the rollout it is in. */
export type AssignmentAnswer = Exclude<Result<typeof rollouts.rolloutAssignment>, { readonly assignments: unknown }>;
/** A signal taken: stored, stale (older than what is kept) or none; `evaluated` false when the node asked does not lead (the leader evaluates it within one tick). */
export type SignalResult = Exclude<Result<typeof node.postEvent>, { readonly delivered: unknown }>;
export type RunJson = Result<typeof runs.getRun>;
/**
 * What `cancelRun` answers: the cancel (`first` false: it was cancelled
 * before, and that cancel is the one shown), the run's items as it found
 * them, and on a node `pendingLeft`: Pending items left once its coordinator
 * has passed (null: not coordinated here; absent on a replayed answer and in AWS).
 */
export type CancelledRun = Result<typeof runs.cancelRun>;
/** Who cancelled a run, when and why. */
export type RunCancelJson = CancelledRun['cancelled'];
export type RunsPage = Result<typeof runs.listRuns>;
export type RunSummaryJson = RunsPage['runs'][number];
/** A page of a run's items; pass `next` as `cursor` for the next page (null: no more). */
export type RunItemsPage = Result<typeof runs.runItems>;
/** One item of a run as `GET /runs/{id}/items` shows it: `result` once done, `error` once failed. */
export type RunItemJson = RunItemsPage['items'][number];
export type ItemState = RunItemJson['state'];
/** Every rollout (or those in a state), newest first, a page of rows. */
export type RolloutsPage = Extract<Result<typeof rollouts.listRollouts>, { readonly next: unknown }>;
/** A rollout in a list (GET /rollouts?state=…): its row, without stages or signals. */
export type RolloutSummaryJson = RolloutsPage['rollouts'][number];
/** One transition of a rollout, as `GET /rollouts/{id}/history` lists it. */
export type HistoryEntryJson = Result<typeof rollouts.rolloutHistory>['history'][number];
export type ClusterStatusJson = Result<typeof cluster.clusterStatus>;
export type LeaderJson = NonNullable<ClusterStatusJson['leader']>;
export type ClusterHealthJson = Result<typeof cluster.clusterHealth>;
export type ClusterEventJson = Result<typeof node.clusterEvents>['events'][number];

/** Each command's route, by the command. */
const COMMAND_ROUTES: ReadonlyMap<string, CommandRoute> = new Map(rollouts.commandRoutes.map((r) => [r.path.slice(r.path.lastIndexOf('/') + 1), r]));

/** A command's route; one the client does not know is still sent on the commands' path, for the server to name those it takes. */
function commandRouteOf(command: Command): CommandRoute {
  return COMMAND_ROUTES.get(command) ?? { ...rollouts.commandRoutes[0]!, path: `/rollouts/{id}/${command}` };
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

export class RolloutClient {
  constructor(readonly options: RolloutClientOptions) {}

  private call<R extends Parameters<typeof callRoute>[1]>(route: R, req: Request<R>, idempotencyKey?: string): Promise<Result<R>> {
    return callRoute(this.options, route, req, idempotencyKey);
  }

  clusterStatus(): Promise<ClusterStatusJson> {
    return this.call(cluster.clusterStatus, {});
  }

  /** Liveness, and whether the store answers and a leader is known (open: no credential needed). */
  clusterHealth(): Promise<ClusterHealthJson> {
    return this.call(cluster.clusterHealth, {});
  }

  /** A node's newest cluster events (elections, joins, leaves), newest first. */
  async clusterEvents(o: { readonly limit?: number } = {}): Promise<readonly ClusterEventJson[]> {
    return (await this.call(node.clusterEvents, { query: o.limit === undefined ? {} : { limit: String(o.limit) } })).events;
  }

  /** The API's OpenAPI 3.1 document, as the server serves it. */
  openApiDocument(): Promise<Record<string, unknown>> {
    return this.call(cluster.openapi, {});
  }

  /** Who leads now; null when no leader is elected. */
  async leader(): Promise<LeaderJson | null> {
    return (await this.clusterStatus()).leader;
  }

  /** Create a rollout from a spec (validated by the server: a bad one is an ApiError 400 naming every field). Idempotent on `id`. */
  createRollout(spec: RolloutSpecInput | RolloutSpec, o: { readonly id?: string } = {}): Promise<CreatedRollout> {
    return this.call(rollouts.createRollout, { body: { spec, ...(o.id !== undefined ? { id: o.id } : {}) } });
  }

  async listRollouts(): Promise<readonly RolloutJson[]> {
    // Bare: the running rollouts, whole.
    const running = (await this.call(rollouts.listRollouts, {})) as Exclude<Result<typeof rollouts.listRollouts>, { readonly next: unknown }>;
    return running.rollouts;
  }

  /** Every rollout (or those in `state`), newest first, a page of rows; pass `next` as `cursor` for the next page. */
  rolloutsPage(o: { readonly state?: RolloutState; readonly cursor?: string; readonly limit?: number } = {}): Promise<RolloutsPage> {
    const query = {
      state: o.state ?? ('all' as const),
      ...(o.cursor ? { cursor: o.cursor } : {}),
      ...(o.limit !== undefined ? { limit: String(o.limit) } : {}),
    };
    return this.call(rollouts.listRollouts, { query }) as Promise<RolloutsPage>;
  }

  getRollout(id: string): Promise<RolloutJson> {
    return this.call(rollouts.getRollout, { params: { id } });
  }

  /** Every transition of the rollout, oldest first. */
  async rolloutHistory(id: string): Promise<readonly HistoryEntryJson[]> {
    return (await this.call(rollouts.rolloutHistory, { params: { id } })).history;
  }

  /** promote, promote-full, pause, resume, abort or retry; needs the leader (followed to it). */
  async command(id: string, command: Command, o: { readonly reason?: string; readonly idempotencyKey?: string } = {}): Promise<CommandResult> {
    const body = o.reason !== undefined ? { reason: o.reason } : {};
    return (await this.call(commandRouteOf(command), { params: { id }, body }, o.idempotencyKey)).action;
  }

  /**
   * The current attempt's stored readings (of `gate`, or every gate), newest first by stage and gate, at most `limit` a gate and
   * stage; with `series`, each judged reading's series too (at most 200 a stage; `seriesOmitted` counts older ones left without).
   */
  async readings(
    id: string,
    o: { readonly gate?: string; readonly limit?: number; readonly series?: boolean } = {},
  ): Promise<{ readonly attempt: number; readonly readings: readonly GateReading[]; readonly seriesOmitted?: number }> {
    const query = {
      ...(o.gate === undefined ? {} : { gate: o.gate }),
      ...(o.limit === undefined ? {} : { limit: String(o.limit) }),
      ...(o.series ? { series: 'true' as const } : {}),
    };
    return this.call(rollouts.rolloutReadings, { params: { id }, query });
  }

  /** Reads one of the rollout's gates now (for `stage`, default the active one) and judges it, storing and acting on nothing. */
  async testGate(id: string, gate: string, o: { readonly stage?: number } = {}): Promise<GateReading> {
    const query = o.stage === undefined ? {} : { stage: String(o.stage) };
    return (await this.call(rollouts.testRolloutGate, { params: { id, gate }, query })).reading;
  }

  /** What assignment answers from: evaluate it in process with `assign(traffic, entity)`. */
  traffic(id: string): Promise<RolloutTraffic> {
    return this.call(rollouts.rolloutTraffic, { params: { id } });
  }

  assignment(id: string, entity: string): Promise<AssignmentAnswer> {
    return this.call(rollouts.rolloutAssignment, { params: { id }, query: { entity: [entity] } }) as Promise<AssignmentAnswer>;
  }

  /** Up to the server's limit of entities in one request. */
  async assignments(id: string, entities: readonly string[]): Promise<readonly AssignmentAnswer[]> {
    if (entities.length === 1) return [await this.assignment(id, entities[0]!)];
    const res = (await this.call(rollouts.rolloutAssignment, { params: { id }, query: { entity: [...entities] } })) as Extract<
      Result<typeof rollouts.rolloutAssignment>,
      { readonly assignments: unknown }
    >;
    return res.assignments.map((a) => ({ rolloutId: res.rolloutId, ...a }));
  }

  /** A rollout signal (`rollout.metrics_reported`, `rollout.alarm_changed`, …) as the CLI's `events publish` sends it. */
  publishSignal(event: SignalInput): Promise<SignalResult> {
    return this.call(node.postEvent, { body: event }) as Promise<SignalResult>;
  }

  createRun(input: CreateRunInput): Promise<CreatedRun> {
    return this.call(runs.createRun, { body: input });
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
    return enqueueRun((body, key) => callRoute(once, runs.createRun, { body }, key), input, o);
  }

  /** Runs newest first, a page of records (`getRun` has each one's counts). */
  runsPage(o: { readonly cursor?: string; readonly limit?: number } = {}): Promise<RunsPage> {
    return this.call(runs.listRuns, { query: { ...(o.cursor ? { cursor: o.cursor } : {}), ...(o.limit !== undefined ? { limit: String(o.limit) } : {}) } });
  }

  getRun(id: string): Promise<RunJson> {
    return this.call(runs.getRun, { params: { id } });
  }

  /**
   * Cancels a run: its Pending items end Failed (`cancelled: <reason> (by
   * <actor>)`), items already running end as they finish, and the run takes
   * no more items. Idempotent: a second cancel answers the first.
   */
  cancelRun(id: string, o: { readonly reason?: string; readonly idempotencyKey?: string } = {}): Promise<CancelledRun> {
    return this.call(runs.cancelRun, { params: { id }, body: o.reason !== undefined ? { reason: o.reason } : {} }, o.idempotencyKey);
  }

  /** One page of a run's items (all, or those in `state`), with results and failure reasons. */
  runItems(id: string, o: { readonly state?: ItemState; readonly cursor?: string; readonly limit?: number } = {}): Promise<RunItemsPage> {
    const query = {
      ...(o.state ? { state: o.state } : {}),
      ...(o.cursor ? { cursor: o.cursor } : {}),
      ...(o.limit !== undefined ? { limit: String(o.limit) } : {}),
    };
    return this.call(runs.runItems, { params: { id }, query });
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
   * every `pollMs` (default 2 s); `onChange` sees each new state or stage,
   * `onRead` every read.
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
      /** Every read, awaited before the next (a watcher that redraws on any change: a reading, a metric, an actuation). */
      readonly onRead?: (r: RolloutJson) => void | Promise<void>;
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
        await o.onRead?.(last);
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
