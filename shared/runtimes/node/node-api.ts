import { hasProviderGates } from '../../rollout/spec.js';
import { workHandlers } from './work-api.js';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Registry } from 'prom-client';
import { API_VERSION, historyJson } from '../../api/handler.js';
import { ROUTES, type NodeRoute, type Route } from '../../api/routes/index.js';
import { HttpError, type ApiResponse, type Handlers, type NodeHook } from '../../api/route.js';
import { handlerOf, parseInput, published, routerOf, TargetError, type Match } from '../../api/router.js';
import { clusterHealth, clusterLeader, clusterStatus, leaderJson, type ClusterView } from '../../api/cluster.js';
import type { ClusterEvent } from '../../cluster/membership.js';
import { InvalidNoticeError } from '../../drain/sources.js';
import { errorMessage, type Logger } from '../../log.js';
import { PublicError } from '../../errors.js';
import { InvalidEventError, parseInboundEvent } from '../../rollout/inbound.js';
import { actuationJson, gatesJson, READINGS_SHOWN } from '../../api/rollout-json.js';
import { movesTargets, RolloutEngine } from '../../rollout/engine.js';
import type { HandleResult } from '../../rollout/promoters.js';
import type { RolloutEvent } from '../../rollout/events.js';
import { PostgresRolloutStore } from '../../adapters/postgres/rollout-store.js';
import { PostgresIdempotency } from '../../adapters/postgres/idempotency.js';
import { RawBody, type HttpRequest } from './http.js';
import type { ControlPlaneNode } from './node.js';
import { NoRouteError, type BusEnvelope } from './triggers.js';
import { guarded, pageCsp } from './guard.js';
import { CertificateAuthenticator } from '../../auth/certificate.js';
import type { Authenticator } from '../../auth/identity.js';
import { TokenAuthenticator } from '../../auth/tokens.js';
import { SignatureAuthenticator } from '../../auth/signature.js';
import { authorizeWorkerRequest } from '../../auth/bindings.js';
import { PostgresSeenSignatures } from '../../adapters/postgres/signatures.js';
import type { Sql } from '../../adapters/postgres/sql.js';
import { OidcAuthenticator } from '../../adapters/oidc/authenticator.js';
import { apiUrlOf, authEnabled, type NodeConfig } from './config.js';

/**
 * What a node serves over HTTP, in front of the shared API routes:
 *
 *   GET  /                  the status page
 *   GET  /metrics           Prometheus
 *   GET  /cluster/status | /cluster/leader | /cluster/health   (Orchestry's field names)
 *   GET  /cluster/events?limit=50   the newest cluster events
 *   GET  /ui/state          everything the status page shows, in one read
 *   POST /events            a rollout signal (metrics, alarm, created, command), or any event
 *                           as EventBridge delivers it (an EC2 spot notice), any node: routed
 *                           by the topology's rules (triggers.ts)
 *   POST /coordinator       a remote worker's steal request (HttpCoordinatorClient): the
 *                           coordinator function's invoke trigger
 *   …and the shared API (rollouts, runs)
 *
 * Writes (any method but GET/HEAD, except /events) need the leader: a
 * follower answers 503 naming the leader in `x-rollout-leader-id` /
 * `x-rollout-leader-url` and the body (a proxy with `proxy_next_upstream
 * http_503` moves on to the next node), or 307 to the leader when the node
 * is told to redirect. No leader: 503 "no leader elected".
 *
 * A write with an `Idempotency-Key` header runs in one transaction with the
 * record of its response: a retry of the same key (a proxy failing over after
 * the node died mid-request, a client retrying) replays that response and
 * never applies the write twice; the same key on a different request is 422.
 *
 * The record is bound to the key and to the request as its actor sent it;
 * an answer that asks to be retried is not recorded (see `final`). A write
 * without a key is applied as it comes: whoever retries it supplies the key
 * (the rollout CLI always does; nginx gives the writes it may send on to
 * another node a key of its own, see nginx.conf.template).
 *
 * Reads keep answering while the store is unreachable or slow, from the last
 * good answer of that path, marked `stale` (with when it was read and why):
 * a live node answers every read within `READ_DEADLINE_MS`, so a proxy that
 * waits longer than that is waiting on a node that is not running (paused,
 * its event loop stuck), and moves on. Every answer names the node that gave
 * it (`x-rollout-node-id`).
 */
const page = readFileSync(new URL('./status-page.html', import.meta.url), 'utf8');

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** How long a read waits for the store before answering from the last good answer (or 503). */
export const READ_DEADLINE_MS = 750;

type Handle = (req: HttpRequest) => Promise<ApiResponse>;

/**
 * Whether an answer is kept as the record of its Idempotency-Key. One that
 * asks to be retried is not: replayed, it would say "try again" forever.
 * Those applied nothing, so running the retry again is safe:
 *   5xx                  nothing was applied (the transaction rolled back)
 *   408, 425, 429        too slow, too early, too many: the same request later may pass
 *   409                  a conflict with the state as it was (a promoter moved the rollout
 *                        under a command, "kept changing; try again"); it may not hold later
 *   Retry-After          the answer says so itself
 */
export function final(res: ApiResponse): boolean {
  if (res.status >= 500 || [408, 409, 425, 429].includes(res.status)) return false;
  return !Object.keys(res.headers ?? {}).some((h) => h.toLowerCase() === 'retry-after');
}

/** The store's answer, or an error once `ms` have passed without one (the query goes on, bounded by the pool's own timeouts). */
function within<T>(ms: number, work: Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const late = { reject: () => reject(new PublicError(`no answer within ${ms} ms`)) };
    const slot = lateSlot(ms);
    slot.add(late);
    work.then(
      (v) => {
        slot.delete(late);
        resolve(v);
      },
      (err: unknown) => {
        slot.delete(late);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/**
 * The reads due to give up in the same tenth of a second, `ms` from now:
 * one timer per slot rather than one per request (an assignment answered
 * from memory would pay more for its timer than for its answer); a read that
 * settles leaves its slot.
 */
const SLOT_MS = 100;
const slots = new Map<number, Set<{ reject(): void }>>();
function lateSlot(ms: number): Set<{ reject(): void }> {
  const at = Math.ceil((Date.now() + ms) / SLOT_MS);
  let slot = slots.get(at);
  if (!slot) {
    const pending = new Set<{ reject(): void }>();
    slots.set(at, (slot = pending));
    setTimeout(
      () => {
        slots.delete(at);
        for (const late of pending) late.reject();
      },
      at * SLOT_MS - Date.now(),
    ).unref();
  }
  return slot;
}

/** The ways this node's configuration proves identity (none: authentication off); signatures seen are kept in `sql`. */
export function authenticatorsOf(c: NodeConfig, sql: Sql, logger?: Logger): Authenticator[] {
  const out: Authenticator[] = [];
  if (c.auth.tokensFile) out.push(TokenAuthenticator.fromFile(c.auth.tokensFile, logger ? { logger } : {}));
  if (c.auth.oidc) out.push(new OidcAuthenticator(c.auth.oidc));
  if (c.tls?.clientCaFile) out.push(new CertificateAuthenticator(new Set(c.auth.certificateScopes)));
  if (c.auth.signalKeysFile) out.push(SignatureAuthenticator.fromFile(c.auth.signalKeysFile, new PostgresSeenSignatures(sql), logger ? { logger } : {}));
  return out;
}

/** The names a node answers to: as configured (`*`: any); else, with authentication off, loopback's and its own; with it on, any. */
export function allowedHostsOf(c: NodeConfig): string[] | null {
  if (c.allowedHosts) return c.allowedHosts.includes('*') ? null : c.allowedHosts;
  if (authEnabled(c)) return null;
  return [...new Set(['localhost', '127.0.0.1', '::1', c.host, c.hostname, new URL(apiUrlOf(c)).hostname].filter((h) => h !== '0.0.0.0' && h !== '::'))];
}

/** The node's routes behind its guard (guard.ts): what a node serves over HTTP. */
export function nodeApi(node: ControlPlaneNode, metrics: Registry, options: { readDeadlineMs?: number } = {}): Handle {
  const c = node.config;
  void reportUnaddressable(node);
  return guarded(nodeRoutes(node, metrics, options), {
    authenticators: authenticatorsOf(c, node.sql, node.logger),
    allowedHosts: allowedHostsOf(c),
    rateLimit: c.rateLimit,
    trustedProxies: c.trustedProxies,
    pageHeaders: { 'content-security-policy': pageCsp(page), 'x-frame-options': 'DENY' },
    answerHeaders: { 'x-rollout-node-id': node.nodeId },
  });
}

function nodeRoutes(node: ControlPlaneNode, metrics: Registry, options: { readDeadlineMs?: number } = {}): Handle {
  const readDeadlineMs = options.readDeadlineMs ?? READ_DEADLINE_MS;
  // The api function's http trigger: the shared routes behind the node's own.
  const shared = node.triggers.http('api');
  const lastGood = new Map<string, { body: unknown; at: number }>();

  const json = (status: number, body: unknown, headers?: Record<string, string>): ApiResponse => ({ status, body, ...(headers ? { headers } : {}) });

  // What a node knows of the cluster: its elector's view, its membership, the lease row within the read deadline.
  const cluster: ClusterView = {
    nodeId: node.nodeId,
    hostname: node.config.hostname,
    apiUrl: node.apiUrl,
    elector: node.config.elector,
    version: API_VERSION,
    leader: () => within(readDeadlineMs, node.refreshLeader()),
    self: () => ({ state: node.state, term: node.term }),
    members: async () => (node.member.nodes = await node.membership.nodes()),
    knownMembers: () => node.member.nodes,
    storeSeen: (err) => (err === null ? node.storeUp() : node.storeDown(err)),
  };

  // Every open status page polls once a second: viewers within half a second share one read.
  let state: { at: number; value: Promise<Awaited<ReturnType<typeof uiState>>> } | null = null;
  const sharedState = () => {
    if (!state || Date.now() - state.at > 500) {
      const value = uiState(node, cluster);
      state = { at: Date.now(), value };
      value.catch(() => (state = null)); // a failed read is not shared
    }
    return state.value;
  };

  async function notLeader(path: string): Promise<ApiResponse> {
    let leader;
    try {
      leader = await node.refreshLeader();
    } catch (err) {
      node.logger.warn('no leader can be confirmed', { error: errorMessage(err) });
      return json(503, { error: 'no leader can be confirmed: store unreachable', nodeId: node.nodeId }, { 'retry-after': '1' });
    }
    if (!leader) return json(503, { error: 'no leader elected', nodeId: node.nodeId }, { 'retry-after': '1' });
    const headers: Record<string, string> = { 'x-rollout-leader-id': leader.id, 'retry-after': '1' };
    if (leader.apiUrl) headers['x-rollout-leader-url'] = leader.apiUrl;
    // The leader's origin and this request's path only: a path such as //elsewhere/ must not name another host.
    if (node.config.redirectWrites && leader.apiUrl)
      return json(
        307,
        { error: `not the leader: ${leader.id} is`, leader: leaderJson(leader) },
        { ...headers, location: `${new URL(leader.apiUrl).origin}/${path.replace(/^\/+/, '')}` },
      );
    return json(503, { error: `not the leader: ${leader.id} is`, leader: leaderJson(leader) }, headers);
  }

  async function idempotent(req: HttpRequest, key: string, found: Match): Promise<ApiResponse> {
    if (key.length > 200) return json(400, { error: 'Idempotency-Key: at most 200 characters' });
    // Who asked is part of the request: another actor's key never replays someone else's answer.
    const fingerprint = createHash('sha256')
      .update(`${req.actor}\n${req.method}\n${req.path}\n${req.body ?? ''}`)
      .digest('hex');
    const after: (() => Promise<void>)[] = [];
    const out = await node.sql.transaction(async (tx) => {
      const records = new PostgresIdempotency(tx);
      // Same-key requests queue here; the second sees the first's committed record.
      await records.lock(key);
      const seen = await records.find(key);
      if (seen) {
        if (seen.fingerprint !== fingerprint) return json(422, { error: `Idempotency-Key ${key} was already used for a different request` });
        return json(seen.status, seen.response, { 'idempotent-replayed': 'true' });
      }
      const engine = new RolloutEngine({ store: new PostgresRolloutStore(tx), bus: node.bus, deferPublish: true, logger: node.logger });
      const res = await node.api({ tx, engine, afterCommit: (fn) => after.push(fn) })(req);
      if (final(res)) await records.save(key, { fingerprint, status: res.status, response: res.body }, node.nodeId);
      return res;
    });
    for (const fn of after) await fn().catch(() => undefined);
    // Events the write produced were left in the outbox until the commit.
    await node.plane.engine.flushOutbox().catch(() => undefined);
    // …and the traffic a command committed is carried out now, after the commit, never inside it.
    const afterCommit = found.route?.nodeHooks?.afterCommit;
    return afterCommit && found.route ? hooks[afterCommit](found.params, out) : out;
  }

  // What was asked, by route and decoded parameters (one key for each spelling of an id), with the query: one page is never another's stale answer.
  const readKey = (req: HttpRequest, found: Match) => {
    const what = found.route ? `${found.route.id} ${found.params.id ?? ''}` : req.path;
    return req.query.size ? `${what}?${req.query.toString()}` : what;
  };
  // Assignment and traffic answer from their rollout's last good read themselves (AssignmentReads), for any entity.
  const answersStale = (found: Match) => found.route?.id === 'rolloutAssignment' || found.route?.id === 'rolloutTraffic';

  async function read(req: HttpRequest, found: Match, run: () => Promise<ApiResponse>): Promise<ApiResponse> {
    try {
      const res = await within(readDeadlineMs, run());
      if (res.headers?.['x-rollout-stale']) {
        // Answered from memory: the store is still away, and health says so.
        node.storeDown(
          new PublicError(((res.body as { stale?: { reason?: string } }).stale?.reason ?? 'store unreachable').replace(/^store unreachable: /, '')),
        );
        return res;
      }
      if (res.status === 200 && !answersStale(found)) {
        lastGood.set(readKey(req, found), { body: res.body, at: Date.now() });
        if (lastGood.size > 500) lastGood.delete(lastGood.keys().next().value!);
      }
      node.storeUp();
      return res;
    } catch (err) {
      node.storeDown(err);
      node.logger.warn('read answered without the store', { path: req.path, error: errorMessage(err) });
      const cached = lastGood.get(readKey(req, found));
      const reason = `store unreachable${err instanceof PublicError ? `: ${err.message}` : ''}`;
      if (!cached || typeof cached.body !== 'object' || cached.body === null) return json(503, { error: reason, nodeId: node.nodeId });
      return json(200, { ...cached.body, stale: { asOf: new Date(cached.at).toISOString(), reason } }, { 'x-rollout-stale': 'true' });
    }
  }

  // By operationId (contract.ts): the node-only routes, and the cluster's, answered with what a node knows.
  const own: Handlers<NodeOwnRoute> = {
    statusPage: () => Promise.resolve({ status: 200, body: new RawBody(page, 'text/html; charset=utf-8') }),
    metrics: async () => ({ status: 200, body: new RawBody(await metrics.metrics(), metrics.contentType) }),
    clusterStatus: () => clusterStatus(cluster) as ReturnType<Handlers<NodeOwnRoute>['clusterStatus']>,
    clusterLeader: () => clusterLeader(cluster) as ReturnType<Handlers<NodeOwnRoute>['clusterLeader']>,
    clusterHealth: () => clusterHealth(cluster) as ReturnType<Handlers<NodeOwnRoute>['clusterHealth']>,
    uiState: async () => ({ status: 200, body: await sharedState() }),
    clusterEvents: async ({ query }) => ({ status: 200, body: { events: (await node.membership.events(query.limit ?? 50)).map(eventJson) } }),
    postEvent: async ({ body: input }) => {
      try {
        // An event as EventBridge delivers it (source, detail-type, detail) goes on the bus its source names:
        // AWS service events (aws.*) on the default bus, the rest on ours, as PutEvents would put them.
        if (isEnvelope(input)) {
          const delivered = await node.triggers.route(input.source.startsWith('aws.') ? 'default' : 'rollout', input);
          return { status: 202, body: { delivered: delivered.map((d) => ({ function: d.fn, result: d.result })) } };
        }
        // A rollout signal as the CLI sends it: on our bus, detail-type = its type.
        const signal = parseInboundEvent(input);
        const { type, ...detail } = signal;
        const [first] = await node.triggers.route('rollout', { source: 'rollout.api', 'detail-type': type, detail });
        const result = first!.result as HandleResult;
        return {
          status: 202,
          body: {
            stored: result.stored,
            evaluated: result.evaluated,
            actions: result.actions.map((a) => ({ rolloutId: a.rolloutId, transition: a.transition, applied: a.applied })),
          },
        };
      } catch (err) {
        if (err instanceof InvalidEventError) return { status: 400, body: { error: err.message, issues: err.issues } };
        if (err instanceof InvalidNoticeError || err instanceof NoRouteError) return { status: 400, body: { error: err.message } };
        throw err;
      }
    },
    coordinator: async ({ body, caller }) => {
      // The guard checked the worker scope; a worker asks only steals, for its own runs, as its own worker id.
      if (!caller.identity) return { status: 403, body: { error: 'the coordinator answers a caller the guard identified only' } };
      const refused = authorizeWorkerRequest(caller.identity, body);
      if (refused) return { status: 403, body: { error: refused } };
      return { status: 200, body: await node.triggers.invoke('coordinator', body) };
    },
    ...workHandlers(node),
  };

  // What a node does once a route that declares it (its nodeHooks) has answered.
  const hooks: Readonly<Record<NodeHook, (params: Readonly<Record<string, string>>, res: ApiResponse) => Promise<ApiResponse>>> = {
    // The traffic a command committed is carried out now, after the commit, never inside it.
    actuate: async (params, res) => {
      if (res.status === 200) await node.actuate(params.id!);
      return res;
    },
    // A run cancelled: its Pending items are failed now, after the commit, by its coordinator (fenced).
    cancelFollowUp: async (params, res) => {
      if (res.status !== 200 || res.headers?.['idempotent-replayed']) return res;
      // Pending left once its coordinator has passed (this request's pass, or a scan that ran first): 0 when all are failed.
      const runId = params.id!;
      const passed = await node.cancelled(runId);
      return { ...res, body: { ...(res.body as object), pendingLeft: passed === null ? null : (await node.plane.stores.ledger.counts(runId)).pending } };
    },
    // A new rollout's first stage starts now, not at the next tick.
    firstEvaluation: async (_params, res) => {
      const id = (res.body as { id?: unknown }).id;
      if (res.status === 201 && typeof id === 'string')
        await node.streaming
          .handle({ type: 'rollout.created', rolloutId: id })
          .catch((err: unknown) => node.logger.warn('first evaluation failed; the next tick retries', { rolloutId: id, error: errorMessage(err) }));
      return res;
    },
  };

  const match = routerOf(ROUTES);

  async function answer(req: HttpRequest, found: Match<Route>): Promise<ApiResponse> {
    const route = found.route;
    const write = !READ_METHODS.has(req.method.toUpperCase());
    // A write any node takes (a signal: its handling asks for the lease itself); every other write needs the leader.
    if (write && !route?.anyNode && !route?.storesNothing && !(await node.isLeader().catch(() => false))) return notLeader(req.path);
    // The node's own routes, and those it answers itself rather than from the shared handler's view (cluster, health).
    if (route && isOwn(route)) {
      const refused = (err: unknown): ApiResponse => {
        if (err instanceof HttpError) return { status: err.status, body: { error: err.message, ...err.extra } };
        throw err;
      };
      let input;
      try {
        input = parseInput(route, { params: found.params, query: req.query, body: req.body, caller: req });
      } catch (err) {
        return refused(err);
      }
      const run = () => handlerOf(own, route)(input).catch(refused);
      return route.method === 'GET' && !FRESH.has(route.id) ? read(req, found, run) : run();
    }
    if (!write) return read(req, found, () => shared(req));
    // A route that stores nothing holds no transaction open while it waits on the outside world.
    const key = route?.storesNothing ? undefined : req.headers['idempotency-key'];
    const res = key ? await idempotent(req, key, found) : await shared(req);
    const after = route?.nodeHooks?.afterAnswer;
    return after && route ? hooks[after](found.route ? found.params : {}, res) : res;
  }

  return async (req) => {
    let found: Match<Route>;
    try {
      found = (req.route as Match<Route> | undefined) ?? match(req.method, req.path);
    } catch (err) {
      if (err instanceof TargetError) return { status: 400, body: { error: err.message } };
      throw err;
    }
    return published(found.route, await answer(req, found));
  };
}

/** The routes a node answers itself: its own, and the cluster's (with what a node knows). */
type NodeOwnRoute = NodeRoute | Extract<Route, { readonly id: 'clusterStatus' | 'clusterLeader' | 'clusterHealth' }>;
const OWN: ReadonlySet<string> = new Set<NodeOwnRoute['id']>([
  ...ROUTES.filter((r): r is NodeRoute => r.nodeOnly === true).map((r) => r.id),
  'clusterStatus',
  'clusterLeader',
  'clusterHealth',
]);
function isOwn(route: Route): route is NodeOwnRoute {
  return OWN.has(route.id);
}
/** Own reads never answered from the last good answer: the page, metrics, health (which says what the store says now), and a worker's reads. */
const FRESH: ReadonlySet<string> = new Set<NodeOwnRoute['id']>(['statusPage', 'metrics', 'clusterHealth', 'workRun', 'workItem', 'workHolders']);

/**
 * Said once when a node starts serving: rollouts and runs whose id no request
 * path reaches (`.` and `..`, which URL clients resolve as dot segments),
 * created before the id rule refused them. Lists and the promoters and
 * coordinators still see them; GET/commands/cancel by id cannot.
 */
export async function reportUnaddressable(node: ControlPlaneNode): Promise<{ kind: string; id: string }[]> {
  try {
    const rows = await node.plane.stores.statusReads.unaddressable();
    for (const r of rows)
      node.logger.warn('an id no request path reaches: see docs/operating/security.md#security-who-may-do-what ("Ids")', { kind: r.kind, id: r.id });
    return rows;
  } catch (err) {
    node.logger.warn('could not look for ids no request path reaches', { error: errorMessage(err) });
    return [];
  }
}

/** What the node's companions add to one rollout on the status page (npm start's demo: its fleet). */
function companionFields(node: ControlPlaneNode, rolloutId: string): Record<string, unknown> {
  let out: Record<string, unknown> = {};
  for (const fields of node.statusFields) out = { ...out, ...fields(rolloutId) };
  return out;
}

function eventJson(e: ClusterEvent) {
  return { id: e.id, node_id: e.nodeId, event_type: e.type, event_data: e.data, timestamp: new Date(e.at).toISOString() };
}

/** In flight (running, paused) and finished rollouts the page shows, newest first. */
const LIVE_SHOWN = 20;
const FINISHED_SHOWN = 10;
/** Transitions listed per rollout, newest first; the rest are at GET /rollouts/{id}/history. */
const HISTORY_SHOWN = 10;
/** Transitions the percent-in-force chart is drawn from: a longer window than the list, still bounded. */
const PERCENT_TRANSITIONS = 50;
/** Runs listed, newest first. */
const RUNS_SHOWN = 20;
/** Failed items listed per run, newest first, and how much of each reason (GET /runs/{id}/items has it whole). */
const FAILURES_SHOWN = 5;
const REASON_CHARS = 500;

/**
 * The status page's one read: leader, nodes, the rollouts in flight and the newest finished ones
 * (each with its recent transitions and the percent in force over them, gate readings and what was
 * applied to its targets), recent runs with counts and their newest failures; and what the node's companions add to a
 * rollout (`npm start`'s demo: what its simulated fleet was answered at each stage). The lists come
 * from the store's StatusReads (api/status-reads.ts), every one capped: what a viewer is sent each
 * second stays the same size however long a rollout's or a run's history grows.
 */
export async function uiState(node: ControlPlaneNode, cluster: ClusterView) {
  const status = (await clusterStatus(cluster)).body as Record<string, unknown>;
  const reads = node.plane.stores.statusReads;
  const rolloutIds = await reads.rollouts({ live: LIVE_SHOWN, finished: FINISHED_SHOWN });
  // One more than the chart is drawn from: whether older transitions exist.
  const transitions = await reads.transitions(rolloutIds, PERCENT_TRANSITIONS + 1);
  const rollouts = [];
  for (const id of rolloutIds) {
    const v = await node.plane.engine.store.load(id);
    if (!v) continue;
    const actuators = v.rollout.spec.actuators ?? [];
    // Alarm names come from the spec: looked up among the rollout's own only.
    const alarms = new Map(Object.entries(v.alarms));
    const newest = transitions.get(id) ?? [];
    rollouts.push({
      id,
      state: v.rollout.state,
      stateReason: v.rollout.stateReason,
      target: v.rollout.spec.target,
      attempt: v.rollout.attempt,
      stages: v.stages.map((s) => {
        const spec = v.rollout.spec.stages[s.index]!;
        const m = v.metrics.get(s.index);
        return {
          name: spec.name,
          percent: spec.percent,
          bakeSeconds: spec.bakeSeconds,
          phase: s.phase,
          activatedAt: s.activatedAt === null ? null : new Date(s.activatedAt).toISOString(),
          gates: spec.gates,
          readings: m ? { requests: m.requests, errors: m.errors, errorRate: m.requests ? m.errors / m.requests : 0, p99LatencyMs: m.p99LatencyMs } : null,
          alarms: spec.gates.alarms.map((a) => ({ name: a, state: alarms.get(a) ?? 'INSUFFICIENT_DATA' })),
        };
      }),
      gates: hasProviderGates(v.rollout.spec)
        ? gatesJson(v, await node.plane.engine.store.gateReadings(id, { perGate: READINGS_SHOWN, series: 'newest' }))
        : [],
      actuators,
      actuation: movesTargets(v) ? actuationJson(await node.plane.engine.store.actuations(id)) : [],
      // Newest first; `historyMore`: older transitions exist beyond these.
      history: newest.slice(0, HISTORY_SHOWN).map(historyJson),
      historyMore: newest.length > HISTORY_SHOWN,
      // `complete`: drawn from the rollout's first transition on, not from a window of its newest.
      percentInForce: { steps: percentSteps(newest.slice(0, PERCENT_TRANSITIONS).reverse()), complete: newest.length <= PERCENT_TRANSITIONS },
      ...companionFields(node, id),
    });
  }
  const runs = [];
  for (const r of await reads.runs(RUNS_SHOWN)) {
    const counts = await node.plane.stores.ledger.counts(r.id);
    runs.push({
      id: r.id,
      createdAt: new Date(r.createdAt).toISOString(),
      coordinatorEpoch: r.coordinatorEpoch,
      counts,
      total: counts.pending + counts.running + counts.done + counts.failed,
      steals: r.steals,
      drains: r.drains,
      done: counts.pending + counts.running === 0,
    });
  }
  // Only runs with failures are asked for them (counts has said which).
  const failures = await reads.failures(
    runs.filter((r) => r.counts.failed > 0).map((r) => r.id),
    { limit: FAILURES_SHOWN, reasonChars: REASON_CHARS },
  );
  const withFailures = runs.map((r) => ({
    ...r,
    failures: (failures.get(r.id) ?? []).map((f) => ({ id: f.id, error: f.error, attempts: f.attempts, worker: f.worker, at: new Date(f.at).toISOString() })),
  }));
  // Renewals come every heartbeat; on the page they would push out what matters.
  const events = (await node.membership.events(100))
    .filter((e) => e.type !== 'lease_renewed')
    .slice(0, 12)
    .map(eventJson);
  return { cluster: status, notes: [...node.statusNotes], rollouts, runs: withFailures, events };
}

/**
 * The percent in force over `events` (oldest first): one step per change, at the transition that made
 * it. An event carries the percent as committed (trafficOf of the state it left); one stored before
 * events carried it is read from what it did, and one that moved no traffic keeps the step it found.
 */
export function percentSteps(events: readonly RolloutEvent[]): { at: string; percent: number; attempt: number }[] {
  const steps: { at: string; percent: number; attempt: number }[] = [];
  let last: number | null = null;
  for (const e of events) {
    const percent: number | null = e.detail.percent ?? percentAfter(e, last);
    if (percent === null || percent === last) continue;
    steps.push({ at: new Date(e.time).toISOString(), percent, attempt: e.detail.attempt });
    last = percent;
  }
  return steps;
}

function percentAfter(e: RolloutEvent, before: number | null): number | null {
  switch (e.detailType) {
    case 'ai.rollout.stage_activated':
      return e.detail.stage?.percent ?? before;
    // The last stage promoted: the completed event of the same transition says 100.
    case 'ai.rollout.stage_promoted':
      return e.detail.nextStage?.percent ?? before;
    case 'ai.rollout.completed':
      return 100;
    // A retry starts with no stage active until its first activation.
    case 'ai.rollout.rollback_detected':
    case 'ai.rollout.aborted':
    case 'ai.rollout.retried':
      return 0;
    default:
      return before;
  }
}

function isEnvelope(input: unknown): input is BusEnvelope {
  return (
    typeof input === 'object' &&
    input !== null &&
    typeof (input as Record<string, unknown>)['detail-type'] === 'string' &&
    typeof (input as Record<string, unknown>).source === 'string'
  );
}
