import { randomUUID } from 'node:crypto';
import { BoundedMap } from '../bounded-map.js';
import { leaderViewOf } from '../cluster/member.js';
import { clusterHealth, clusterLeader, clusterStatus, leaderJson, type ClusterView } from './cluster.js';
import { API_VERSION, SHARED_ROUTES, type SharedRoute } from './routes/index.js';
import { commandRouteId, MAX_SERIES_READINGS, RETRY_ABORTED_SCOPE, SERIES_POINTS_BUDGET, type CommandRouteId } from './routes/rollouts.js';
import { openApiDocument } from './openapi.js';
import { handlerOf, parseInput, published, routerOf, TargetError, unmatched, type Match } from './router.js';
import { HttpError, type ApiResponse, type Caller, type Handlers, type Parsed } from './route.js';
import type { Scope } from '../auth/scopes.js';
import type { Identity } from '../auth/identity.js';
import { systemClock, type Clock } from '../clock.js';
import { canonicalJson } from '../canonical-json.js';
import { ConfigError, StoreContendedError } from '../errors.js';
import { PROMOTION_LEASE } from '../lease/names.js';
import type { LeaseStore } from '../lease/store.js';
import { BadCursorError } from '../cursor.js';
import type { LedgerStore, RunCancel } from '../ledger/store.js';
import type { WorkItem } from '../ledger/model.js';
import { dispatch } from '../ledger/dispatch.js';
import { shardsFor } from '../ledger/capacity.js';
import type { WorkQueue } from '../queue/port.js';
import { COMMANDS, type Command } from '../rollout/command-names.js';
import { AbortIsFinalError, createRollout, runCommand } from '../rollout/commands.js';
import type { OutboundPolicy } from '../outbound/policy.js';
import { gateNamespaceIssues, hasProviderGates, outboundIssues, parseRolloutSpec, stageProviders } from '../rollout/spec.js';
import type { GateReader } from '../rollout/gate-reader.js';
import { withoutSeries, type GateReading } from '../rollout/gates.js';
import { beforeRolloutHooks } from '../rollout/gate-spec.js';
import { actuationIssues, type TargetsConfig } from '../actuation/targets.js';
import { movesTargets, type Leadership, type RolloutEngine } from '../rollout/engine.js';
import { READINGS_SHOWN, viewJson } from './rollout-json.js';
import { assign, trafficJson, type RolloutTraffic } from '../rollout/assignment.js';
import { activeStage, type Rollout, type RolloutView } from '../rollout/model.js';
import type { RolloutEvent } from '../rollout/events.js';
import { RolloutConflictError, UnknownRolloutError } from '../rollout/store.js';
import { TransitionRejectedError } from '../rollout/transitions.js';

/**
 * The control plane's HTTP API, independent of transport: the Lambda behind
 * API Gateway and a cluster node serve the same routes through this. The
 * routes, what each takes and what each answers, are defined once in
 * contract.ts (and published as the OpenAPI document); this implements those
 * not marked node-only.
 *
 * Bad requests get a 4xx whose body names what is wrong. Writes that need the
 * promotion lease answer 503 with the current leader when this node does not
 * hold it.
 */
export interface ApiRequest {
  readonly method: string;
  readonly path: string;
  readonly body: string | null;
  /** Who is calling (the IAM principal behind the request). */
  readonly actor: string;
  /** The query string, where a route reads one. */
  readonly query?: URLSearchParams;
  /** Request headers, names lower-cased (If-None-Match is read). */
  readonly headers?: Readonly<Record<string, string | undefined>>;
  /** The route a transport in front already matched (a node's guard, the Lambda): each request is matched once. */
  readonly route?: Match;
  /**
   * What the caller was found to hold (a node's credential; on the deployed
   * API, what IAM proved by admitting the route). What a route needs is
   * checked in front; a handler reads this for what depends on the state it
   * acts on (retrying an aborted rollout needs admin). Absent: every scope.
   */
  readonly scopes?: ReadonlySet<Scope>;
  /** Who the guard found the caller to be, with what its credential is bound to (a node's /coordinator checks a worker's runs by it). */
  readonly identity?: Identity;
  /** Aborted when the client has gone away: a long wait on its behalf (a remote worker's claim) stops. */
  readonly signal?: AbortSignal;
}

export type { ApiResponse } from './route.js';

export interface ApiDeps {
  readonly nodeId: string;
  readonly engine: RolloutEngine;
  readonly leadership: Leadership;
  readonly leases: LeaseStore;
  readonly ledger: LedgerStore;
  /** Where a new run's items are sent (SQS in AWS). */
  readonly workQueue: () => WorkQueue;
  /** What a spec may make us request: a spec naming anything else is refused at creation. */
  readonly outbound: OutboundPolicy;
  /** The targets a spec may move, by name: a spec naming another is refused at creation. */
  readonly targets?: TargetsConfig;
  /** The CloudWatch namespaces cloudwatchMetric gates may read (default null: no limit): a spec naming another is refused at creation. */
  readonly gateNamespaces?: readonly string[] | null;
  /** Where assignment and traffic answers read rollouts (default: the store, every time); shared by a process's handlers. */
  readonly assignmentReads?: AssignmentReads;
  /** Reads a gate on demand (`POST /rollouts/{id}/gates/{gate}/test`); absent: that route answers 503. */
  readonly gateReader?: Pick<GateReader, 'readNow'>;
  readonly clock?: Clock;
}

export { PROMOTION_LEASE } from '../lease/names.js';
export { API_VERSION } from './routes/index.js';
export { HttpError } from './route.js';
export { parseBody } from './router.js';
export { MAX_ASSIGNMENT_ENTITIES } from './routes/rollouts.js';
export { MAX_ITEMS_PAGE, runRequestJsonSchema } from './routes/runs.js';

/** A rollout in a list: its row, without stages or signals (GET /rollouts/{id} has those). */
export function rolloutSummaryJson(r: Rollout) {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  const { target } = r.spec;
  return {
    id: r.id,
    state: r.state,
    attempt: r.attempt,
    version: r.version,
    service: target.service,
    newVersion: target.version,
    stableVersion: target.stableVersion ?? null,
    stages: r.spec.stages.length,
    createdAt: iso(r.createdAt),
    updatedAt: iso(r.updatedAt),
    stateBy: r.stateBy,
    stateReason: r.stateReason,
  };
}

/** One transition of a rollout's history, from the event it emitted. */
export function historyJson(e: RolloutEvent) {
  const d = e.detail;
  return {
    seq: d.seq ?? null,
    type: e.detailType,
    at: new Date(e.time).toISOString(),
    actor: d.actor,
    epoch: d.epoch,
    attempt: d.attempt,
    stage: d.stage ?? null,
    percent: d.percent ?? null,
    reason: d.reason ?? null,
    ...(d.target ? { target: d.target } : {}),
    ...(d.insufficientData ? { insufficientData: d.insufficientData } : {}),
  };
}

/** A run's cancel as the API shows it. */
export function cancelJson(c: RunCancel) {
  return { at: new Date(c.at).toISOString(), by: c.by, reason: c.reason };
}

/** An item as the API shows it: what it was asked, where it is, and what came of it. */
export function itemJson(i: WorkItem) {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    id: i.id,
    state: i.state,
    payload: i.payload,
    result: i.state === 'done' ? i.result : null,
    error: i.error,
    attempts: i.attempts,
    worker: i.worker,
    claimedAt: iso(i.claimedAt),
    heartbeatAt: iso(i.heartbeatAt),
  };
}

/** How long an assignment or traffic answer waits for the store when it has a rollout's last good read to answer from instead. */
export const ASSIGNMENT_READ_DEADLINE_MS = 500;

/** A rollout as last read well, answered because the store did not answer (in time): the answer says so. */
export class StaleView {
  constructor(
    readonly view: RolloutView,
    readonly asOf: number,
    readonly reason: string,
  ) {}
}

/**
 * The rollouts assignment and traffic answers read: each read is served again
 * for `ms` before the store is read anew, and one read per rollout is in
 * flight at a time, so a fleet asking many times a second costs the store one
 * read per rollout per window. A command through any of the process's
 * handlers drops its rollout's read at once; a promoter's transition is seen
 * within `ms` (clients cache answers for 5 s anyway). A failed read is not
 * kept. 0: every answer reads the store.
 *
 * Each rollout's last good read is kept too: when the store fails, or gives
 * no answer within `deadlineMs`, every entity is answered from it (a
 * StaleView), not only the entities asked about before the store went away;
 * for `maxStaleMs` (10 minutes) after that read, no longer.
 */
export class AssignmentReads {
  private readonly kept = new BoundedMap<string, { readonly at: number; readonly view: Promise<RolloutView | null>; settled: boolean }>(1_000);
  private readonly good = new BoundedMap<string, { readonly at: number; readonly view: RolloutView }>(1_000);

  constructor(
    readonly ms: number,
    readonly deadlineMs = ASSIGNMENT_READ_DEADLINE_MS,
    /** A last good read older than this is not answered from: the error stands (the OpenFeature provider's own default). */
    readonly maxStaleMs = 600_000,
  ) {}

  view(id: string, load: (id: string) => Promise<RolloutView | null>): Promise<RolloutView | StaleView | null> {
    const now = Date.now();
    let entry = this.kept.get(id);
    if (!entry || now - entry.at >= this.ms) {
      const read = load(id);
      const fresh = { at: now, view: read, settled: false };
      entry = fresh;
      read.then(
        (v) => {
          fresh.settled = true;
          if (v) this.good.set(id, { at: Date.now(), view: v });
          else this.good.delete(id);
        },
        () => {
          fresh.settled = true;
          if (this.kept.get(id) === fresh) this.kept.delete(id);
        },
      );
      if (this.ms > 0) this.kept.set(id, fresh);
    }
    const kept = this.good.get(id);
    const good = kept && now - kept.at <= this.maxStaleMs ? kept : undefined;
    // Answered (the common case), or nothing to fall back on: the store's answer or its error.
    if (entry.settled || !good) return entry.view;
    return orLastGood(entry.view, good, this.deadlineMs);
  }

  forget(id: string): void {
    this.kept.delete(id);
  }
}

function orLastGood(read: Promise<RolloutView | null>, good: { at: number; view: RolloutView }, deadlineMs: number): Promise<RolloutView | StaleView | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(new StaleView(good.view, good.at, `store unreachable: no answer within ${deadlineMs} ms`)), deadlineMs);
    read.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      () => {
        clearTimeout(timer);
        resolve(new StaleView(good.view, good.at, 'store unreachable'));
      },
    );
  });
}

/** A read view's traffic, worked out once per view rather than once per entity asked about. */
const traffics = new WeakMap<RolloutView, RolloutTraffic>();
/** Readings whose series fit SERIES_POINTS_BUDGET, the newest first; the older ones' series are left out and counted. */
export function withinBudget(readings: readonly GateReading[]): { readonly readings: GateReading[]; readonly seriesOmitted?: number } {
  const size = (r: GateReading) => {
    const s = r.series;
    if (!s) return 0;
    return s.kind === 'values'
      ? s.canary.length + s.baseline.length
      : s.canary.requests.length + s.canary.errors.length + s.baseline.requests.length + s.baseline.errors.length;
  };
  const keep = new Set<GateReading>();
  let spent = 0;
  for (const r of [...readings].filter((x) => x.series).sort((a, b) => b.at - a.at)) {
    if (spent + size(r) > SERIES_POINTS_BUDGET) break;
    spent += size(r);
    keep.add(r);
  }
  const omitted = readings.filter((r) => r.series && !keep.has(r)).length;
  return { readings: readings.map((r) => (r.series && !keep.has(r) ? withoutSeries(r) : r)), ...(omitted ? { seriesOmitted: omitted } : {}) };
}

function trafficFor(view: RolloutView): RolloutTraffic {
  let t = traffics.get(view);
  if (!t) traffics.set(view, (t = trafficJson(view)));
  return t;
}

/**
 * An answer that depends on the rollout's committed state alone: every
 * transition bumps the version (and a retry the attempt), so that pair is its
 * ETag; a client holding it gets a 304 with no body.
 */
function cacheable<B extends object>(
  caller: Caller,
  read: RolloutView | StaleView,
  body: (view: RolloutView) => B,
): { status: 200; body: B; headers: Record<string, string> } | { status: 304; body: null; headers: Record<string, string> } {
  // From the last good read: said in the body and a header, and neither validated nor cached.
  if (read instanceof StaleView)
    return {
      status: 200,
      body: { ...body(read.view), stale: { asOf: new Date(read.asOf).toISOString(), reason: read.reason } },
      headers: { 'x-rollout-stale': 'true', 'cache-control': 'no-store' },
    };
  const view = read;
  const headers = { etag: `"${view.rollout.attempt}.${view.rollout.version}"`, 'cache-control': 'private, max-age=5' };
  if (caller.headers?.['if-none-match']?.split(',').some((t) => t.trim().replace(/^W\//, '') === headers.etag)) return { status: 304, body: null, headers };
  return { status: 200, body: body(view), headers };
}

export function apiHandler(deps: ApiDeps): (req: ApiRequest) => Promise<ApiResponse> {
  const clock = deps.clock ?? systemClock;
  // What the API alone knows of the cluster: the lease row and its own holder id (a node answers /cluster/* with more).
  const cluster: ClusterView = {
    nodeId: deps.nodeId,
    elector: 'lease',
    version: API_VERSION,
    leader: async () => leaderViewOf(await deps.leases.read(PROMOTION_LEASE), clock.now()),
  };

  async function requireLeadership() {
    const token = await deps.leadership();
    if (token) return token;
    const leader = await cluster.leader();
    throw new HttpError(503, leader ? `not the leader: ${leader.id} is` : 'no leader elected', { leader: leader ? leaderJson(leader) : null });
  }

  /** A run's spec is fixed when it is created: a request naming another one is refused, not merged. */
  async function sameSpec(id: string, spec: unknown): Promise<void> {
    const run = await deps.ledger.getRun(id);
    if (run && canonicalJson(run.spec) !== canonicalJson(spec)) throw new HttpError(409, `run ${id} exists with a different spec`, { spec: run.spec });
  }

  const reads = deps.assignmentReads ?? new AssignmentReads(0);
  async function assignmentView(id: string): Promise<RolloutView | StaleView> {
    const found = await reads.view(id, (x) => deps.engine.store.load(x));
    if (!found) throw new HttpError(404, `rollout ${id} not found`);
    return found;
  }

  async function mustLoad(id: string): Promise<RolloutView> {
    const view = await deps.engine.store.load(id);
    if (!view) throw new HttpError(404, `rollout ${id} not found`);
    return view;
  }

  async function command_(command: Command, input: Parsed<SharedRouteOf<CommandRouteId>>): Promise<ApiResponse & { status: 200 }> {
    const token = await requireLeadership();
    const id = input.params.id;
    const { caller } = input;
    let action: Awaited<ReturnType<typeof runCommand>>;
    try {
      // Decided on the state the command is applied to (a rollout aborted meanwhile is seen), not on a read before it.
      action = await runCommand(deps.engine, token, {
        rolloutId: id,
        command,
        actor: caller.actor,
        retryAborted: !caller.scopes || caller.scopes.has(RETRY_ABORTED_SCOPE),
        ...(input.body.reason ? { reason: input.body.reason } : {}),
      });
    } catch (err) {
      if (err instanceof AbortIsFinalError)
        throw new HttpError(403, `${caller.actor} lacks the "${RETRY_ABORTED_SCOPE}" scope, which retrying an aborted rollout needs (${id} was aborted)`);
      throw err;
    } finally {
      // Whatever the command did, the next assignment reads it (a read taken while it ran is not kept either).
      reads.forget(id);
    }
    return {
      status: 200,
      body: { action: { transition: action.transition, applied: action.applied, stage: action.stage ?? null, events: action.events.map((e) => e.detailType) } },
    };
  }

  let document: Record<string, unknown> | undefined;
  const commands = Object.fromEntries(
    COMMANDS.map((command) => [commandRouteId(command), (input: Parsed<SharedRouteOf<CommandRouteId>>) => command_(command, input)]),
  ) as Pick<Handlers<SharedRoute>, CommandRouteId>;
  const handlers: Handlers<SharedRoute> = {
    // api/cluster.ts builds these answers for both runtimes, typed as any answer: taken as their routes'.
    clusterStatus: () => clusterStatus(cluster, clock.now()) as ReturnType<Handlers<SharedRoute>['clusterStatus']>,
    clusterLeader: () => clusterLeader(cluster) as ReturnType<Handlers<SharedRoute>['clusterLeader']>,
    clusterHealth: () => clusterHealth(cluster, clock.now()) as ReturnType<Handlers<SharedRoute>['clusterHealth']>,
    openapi: () => Promise.resolve({ status: 200, body: (document ??= openApiDocument()) }),
    createRollout: async ({ body, caller }) => {
      const spec = parseRolloutSpec(body.spec);
      const refused = outboundIssues(spec, deps.outbound);
      if (refused.length)
        throw new HttpError(400, 'invalid rollout spec: it asks for requests the operator has not allowed', { issues: refused.map((i) => `spec.${i}`) });
      const unreadable = gateNamespaceIssues(spec, deps.gateNamespaces ?? null);
      if (unreadable.length)
        throw new HttpError(400, 'invalid rollout spec: it reads CloudWatch namespaces the operator has not allowed', {
          issues: unreadable.map((i) => `spec.${i}`),
        });
      const unmovable = actuationIssues(spec, deps.targets ?? {});
      if (unmovable.length)
        throw new HttpError(400, 'invalid rollout spec: it asks to move targets that cannot be moved as asked', { issues: unmovable.map((i) => `spec.${i}`) });
      const out = await createRollout(deps.engine, { spec: body.spec, actor: caller.actor, ...(body.id ? { id: body.id } : {}) });
      const headers = { location: `/rollouts/${out.id}` };
      return out.created ? { status: 201, body: { id: out.id, created: true }, headers } : { status: 200, body: { id: out.id, created: false }, headers };
    },
    listRollouts: async ({ query }) => {
      // Bare: the running rollouts, whole. With state, cursor or limit: every rollout, newest first, a page of rows.
      if (query.state === undefined && query.cursor === undefined && query.limit === undefined)
        return { status: 200, body: { rollouts: (await deps.engine.store.loadRunning()).map((v) => viewJson(v, clock.now())) } };
      const page = await deps.engine.store.list({
        limit: query.limit ?? 50,
        ...(query.state !== undefined && query.state !== 'all' ? { state: query.state } : {}),
        ...(query.cursor ? { cursor: query.cursor } : {}),
      });
      return { status: 200, body: { rollouts: page.rollouts.map(rolloutSummaryJson), next: page.next } };
    },
    getRollout: async ({ params: { id } }) => {
      const view = await mustLoad(id);
      const hasGates = hasProviderGates(view.rollout.spec);
      const [readings, actuations] = await Promise.all([
        hasGates ? deps.engine.store.gateReadings(id, { perGate: READINGS_SHOWN, series: 'newest' }) : undefined,
        movesTargets(view) ? deps.engine.store.actuations(id) : undefined,
      ]);
      return { status: 200, body: viewJson(view, clock.now(), readings, actuations) };
    },
    // Every transition, oldest first: what its events recorded (who, when, under which epoch, why).
    rolloutHistory: async ({ params: { id } }) => {
      await mustLoad(id);
      const events = await deps.engine.store.events(id);
      return { status: 200, body: { rolloutId: id, history: events.map(historyJson) } };
    },
    rolloutAssignment: async ({ params: { id }, query: { entity: entities }, caller }) =>
      cacheable(caller, await assignmentView(id), (view) => {
        const traffic = trafficFor(view);
        const one = (entity: string) => {
          const a = assign(traffic, entity);
          return { entity, version: a.version, variant: a.variant, percent: a.percent, stage: a.stage, attempt: a.attempt, bucket: a.bucket };
        };
        return entities.length === 1 ? { rolloutId: id, ...one(entities[0]!) } : { rolloutId: id, assignments: entities.map(one) };
      }),
    // What assignment answers from, for a client that evaluates in process (the OpenFeature provider).
    rolloutTraffic: async ({ params: { id }, caller }) => cacheable(caller, await assignmentView(id), trafficFor),
    rolloutReadings: async ({ params: { id }, query }) => {
      const view = await mustLoad(id);
      if (query.series && query.limit !== undefined && query.limit > MAX_SERIES_READINGS)
        throw new HttpError(400, `limit: at most ${MAX_SERIES_READINGS} readings a stage with series=true, got ${query.limit}`);
      const readings = await deps.engine.store.gateReadings(id, {
        perGate: query.limit ?? (query.series ? MAX_SERIES_READINGS : 1_000),
        attempt: view.rollout.attempt,
        ...(query.gate === undefined ? {} : { gate: query.gate }),
        ...(query.series ? { series: 'all' as const } : {}),
      });
      return { status: 200, body: { rolloutId: id, attempt: view.rollout.attempt, ...withinBudget(readings) } };
    },
    // One gate read now and judged, never stored or acted on: what a tick would make of it.
    testRolloutGate: async ({ params: { id, gate: name }, query }) => {
      const reader = deps.gateReader;
      if (!reader) throw new HttpError(503, 'gates are not read where this API runs');
      const view = await mustLoad(id);
      const stage = query.stage ?? activeStage(view)?.index;
      if (stage === undefined) throw new HttpError(409, `rollout ${id} has no active stage (${view.rollout.state}); name one with ?stage=`);
      const spec = view.rollout.spec.stages[stage];
      if (!spec) throw new HttpError(404, `rollout ${id} has no stage ${stage} (it has ${view.rollout.spec.stages.length})`);
      const gates = [...(stage === 0 ? beforeRolloutHooks(view.rollout.spec.hooks) : []), ...stageProviders(view.rollout.spec, stage)];
      const gate = gates.find((g) => g.name === name);
      if (!gate)
        throw new HttpError(
          404,
          `rollout ${id} has no gate ${name} in stage ${stage} (${spec.name}); its gates there: ${gates.map((g) => g.name).join(', ') || 'none'}`,
        );
      if (gate.type === 'webhook') throw new HttpError(409, `gate ${name} is a ${gate.hook} hook: a call into another system, never made as a test`);
      // Within the deployed API's 29 s: a gate allowed a longer timeout is given 20 s here.
      const bounded = { ...gate, timeoutSeconds: Math.min(gate.timeoutSeconds, 20) };
      return { status: 200, body: { rolloutId: id, stage, stored: false as const, reading: await reader.readNow(view, stage, bounded) } };
    },
    ...commands,
    createRun: async ({ body }) => {
      const id = body.id ?? `run_${randomUUID()}`;
      const now = clock.now();
      const shards = body.shards ?? (body.itemsPerSecond === undefined ? undefined : shardsFor(body.itemsPerSecond));
      const { created } = await deps.ledger.createRun(id, body.spec ?? {}, now, shards === undefined ? {} : { shards });
      if (!created && body.spec !== undefined) await sameSpec(id, body.spec);
      if (!created) {
        const cancelled = (await deps.ledger.getRun(id))?.cancelled;
        if (cancelled) throw new HttpError(409, `run ${id} was cancelled: it takes no more items`, { cancelled: cancelJson(cancelled) });
      }
      const { ids, added } = await deps.ledger.enqueue(id, body.items, now);
      // Every item of the request is sent, new or not: a retry completes a request that stored its
      // items and failed before sending (and so does the coordinator's scan, which sends what was
      // never recorded as sent). A duplicate message is harmless: a worker drops one whose item is
      // no longer pending. Items never claimed yet (version 0) are recorded as sent.
      await dispatch(
        deps.ledger,
        deps.workQueue(),
        id,
        [...new Set(ids)].map((itemId) => ({ id: itemId, version: 0 })),
        now,
      );
      const headers = { location: `/runs/${id}` };
      return created
        ? { status: 201, body: { id, created: true, items: ids.length, added }, headers }
        : { status: 200, body: { id, created: false, items: ids.length, added }, headers };
    },
    // Recorded once (monotone: no fence needed); its coordinator fails the Pending items, fenced: at once on a node, at its next scan in AWS.
    cancelRun: async ({ params: { id }, body, caller }) => {
      const out = await deps.ledger.cancelRun(id, { by: caller.actor, reason: body.reason ?? null }, clock.now());
      if (!out) throw new HttpError(404, `run ${id} not found`);
      return { status: 200, body: { id, cancelled: cancelJson(out.cancelled), first: out.first, counts: await deps.ledger.counts(id) } };
    },
    // Newest first, a page of run records; GET /runs/{id} has each one's counts.
    listRuns: async ({ query }) => {
      const page = await deps.ledger.listRuns({ limit: query.limit ?? 50, ...(query.cursor ? { cursor: query.cursor } : {}) });
      const iso = (ms: number) => new Date(ms).toISOString();
      return {
        status: 200,
        body: {
          runs: page.runs.map((r) => ({
            id: r.id,
            spec: r.spec as RunSpec,
            createdAt: iso(r.createdAt),
            coordinatorEpoch: r.coordinatorEpoch,
            shards: r.shards ?? null,
            cancelled: r.cancelled ? cancelJson(r.cancelled) : null,
          })),
          next: page.next,
        },
      };
    },
    getRun: async ({ params: { id } }) => {
      const run = await deps.ledger.getRun(id);
      if (!run) throw new HttpError(404, `run ${id} not found`);
      const counts = await deps.ledger.counts(id);
      const throttled = run.throttled
        ? {
            at: new Date(run.throttled.at).toISOString(),
            secondsAgo: Math.max(0, Math.round((clock.now() - run.throttled.at) / 1000)),
            keyFamily: run.throttled.family,
            requests: run.throttled.requests,
          }
        : null;
      return {
        status: 200,
        body: {
          id,
          spec: run.spec as RunSpec,
          coordinatorEpoch: run.coordinatorEpoch,
          createdAt: new Date(run.createdAt).toISOString(),
          shards: run.shards ?? null,
          counts,
          done: counts.pending + counts.running === 0,
          throttled,
          cancelled: run.cancelled ? cancelJson(run.cancelled) : null,
        },
      };
    },
    runItems: async ({ params: { id }, query }) => {
      if (!(await deps.ledger.getRun(id))) throw new HttpError(404, `run ${id} not found`);
      const page = await deps.ledger.items(id, {
        limit: query.limit ?? 100,
        ...(query.state ? { state: query.state } : {}),
        ...(query.cursor ? { cursor: query.cursor } : {}),
      });
      return { status: 200, body: { runId: id, items: page.items.map(itemJson), next: page.next } };
    },
  };

  return async (req) => {
    // A node's own routes never reach here: matched in front, they are answered there.
    let found: Match<SharedRoute>;
    try {
      found = req.route?.route && !req.route.route.nodeOnly ? (req.route as Match<SharedRoute>) : sharedRoute(req.method, req.path);
    } catch (err) {
      return refusal(err);
    }
    const route = found.route;
    const res = await (async () => {
      if (!route) throw unmatched(req.method, req.path, found);
      const input = parseInput(route, {
        params: (found as { params: Readonly<Record<string, string>> }).params,
        query: req.query,
        body: req.body,
        caller: req,
      });
      return handlerOf(handlers, route)(input);
    })().catch(refusal);
    return published(route, res);
  };
}

/** A run's spec as stored: the JSON object it was created with (createRunBody's spec). */
type RunSpec = Readonly<Record<string, unknown>>;

/** The route of the shared table with id `Id`. */
type SharedRouteOf<Id extends string> = Extract<SharedRoute, { readonly id: Id }>;

/** The routes this handler serves (not the node's own), matched by one router for the process: a node builds a handler per idempotent write. */
const sharedRoute = routerOf(SHARED_ROUTES);

/** A refusal the API names (4xx, or 503 to retry); anything else is a fault, thrown on. */
export function refusal(err: unknown): ApiResponse {
  if (err instanceof HttpError) return { status: err.status, body: { error: err.message, ...err.extra } };
  if (err instanceof ConfigError) return { status: 400, body: { error: err.message, issues: err.issues } };
  if (err instanceof UnknownRolloutError) return { status: 404, body: { error: err.message } };
  if (err instanceof RolloutConflictError) return { status: 409, body: { error: err.message } };
  if (err instanceof TransitionRejectedError) return { status: 409, body: { error: err.message, transition: err.transition, reason: err.reason } };
  if (err instanceof StoreContendedError) return { status: 503, body: { error: err.message }, headers: { 'retry-after': '1' } };
  if (err instanceof BadCursorError) return { status: 400, body: { error: err.message } };
  if (err instanceof TargetError) return { status: 400, body: { error: err.message } };
  throw err;
}
