import type pg from 'pg';
import { AdvisoryLockElector } from '../adapters/postgres/advisory-lock-elector.js';
import { apiHandler, AssignmentReads, type ApiDeps } from '../api/handler.js';
import { PROMOTION_LEASE } from '../lease/names.js';
import type { EventBus } from '../events/bus.js';
import { runtimeLeaseTimings } from '../lease/config.js';
import { LeaseElector, type ElectorCallbacks, type LeaderElector } from '../lease/elector.js';
import { pinStaticLeader } from '../lease/static-elector.js';
import { openRunCoordinator, type OpenedCoordinator } from '../ledger/open.js';
import { RunCoordinators, type RunCoordinatorsOptions } from '../ledger/run-coordinators.js';
import type { HeartbeatWatch } from '../ledger/staleness.js';
import type { FencedError } from '../lease/fencing.js';
import { silentLogger, type Logger } from '../log.js';
import type { WorkQueue } from '../queue/port.js';
import { WorkerRegistry } from '../registry/registry.js';
import { campaignEachTime, leadershipOf, RolloutEngine, type Leadership } from '../rollout/engine.js';
import { GateReader, type GateProviders } from '../rollout/gate-reader.js';
import { defaultGateProviders } from './gates.js';
import { OutboundPolicy } from '../outbound/policy.js';
import type { SecretSource } from '../outbound/secrets.js';
import { openStores, type StoreBundle, type StoreConfig } from './stores.js';
import { Actuation } from '../actuation/reconcile.js';
import type { Actuator } from '../actuation/port.js';
import { targetOutboundIssues, type TargetsConfig } from '../actuation/targets.js';
import { ConfigError } from '../errors.js';
import { systemClock } from '../clock.js';
import { actuatorsFor } from './actuators.js';

/**
 * The one composition root: from a validated configuration, the store
 * bundle, the promotion elector, the rollout engine, the run coordinators
 * and the API, wired the same way for every runtime. The Lambda functions
 * (`functions/runtime.ts`), a cluster node and `npm start`
 * (`runtimes/node/node.ts`) are adapters over it: they say where the
 * configuration comes from and which triggers call what, nothing more.
 *
 * Election comes in the three forms the runtimes need:
 *   lease          a row lease; `loop`: the elector campaigns on its own timer
 *                  (a long-lived node), otherwise every leadership check is one
 *                  campaign step (a Lambda invocation: no loop survives a
 *                  frozen sandbox)
 *   advisory-lock  a PostgreSQL session lock, backed by the lease row for fencing
 *   static         always leads, its epoch pinned in the lease row once (one node)
 */
export type ElectionConfig =
  | { readonly kind: 'lease'; readonly loop: boolean; readonly isLeaderCacheMs?: number }
  | { readonly kind: 'advisory-lock'; readonly connection: pg.PoolConfig }
  | { readonly kind: 'static' };

export interface ControlPlaneConfig {
  readonly store: StoreConfig;
  /** This process's (or, in AWS, this stack's) lease holder id. */
  readonly holderId: string;
  /** The timings of every lease held: promotion_leader and each run's coordinator lease. */
  readonly timings: { readonly ttlMs: number; readonly renewIntervalMs: number; readonly retryIntervalMs: number };
  readonly election: ElectionConfig;
  /** Where rollout events are published. */
  readonly bus: EventBus;
  /** Written on the lease row, so followers and proxies can name and reach the leader. */
  readonly leaderMeta?: { readonly hostname: string | null; readonly apiUrl: string | null };
  /** Where provider gates are read from (default: Prometheus over HTTP under `outbound`, CloudWatch with the process's AWS identity). */
  readonly gateProviders?: GateProviders;
  /** What a spec may make us request (default: nothing; a spec naming an origin is refused). */
  readonly outbound?: OutboundPolicy;
  /** The CloudWatch namespaces cloudwatchMetric gates may read (default: no limit); a spec naming another is refused at creation. */
  readonly gateNamespaces?: readonly string[] | null;
  /** How long (ms) a rollout read for assignment and traffic answers is served again (AssignmentReads; default 0). */
  readonly assignmentReadMs?: number;
  /** The targets rollouts may move, by name (default: none; a spec naming one is refused). */
  readonly targets?: TargetsConfig;
  /** Actuators for `targets` (default: actuatorsFor(targets), with the SDK's default clients). */
  readonly actuators?: ReadonlyMap<string, Actuator>;
  /** Where the outbound credentials' secrets are read (default: this process's environment and files). */
  readonly secrets?: SecretSource;
  /** Leadership changes (a node's cluster bookkeeping, made over the opened stores); a Lambda has none. */
  readonly callbacks?: (stores: StoreBundle) => ElectorCallbacks;
  readonly logger?: Logger;
}

export interface ControlPlane {
  readonly stores: StoreBundle;
  readonly engine: RolloutEngine;
  /** Reads due provider gates on the BatchPromoter's tick. */
  readonly gateReader: GateReader;
  readonly registry: WorkerRegistry;
  readonly elector: LeaderElector;
  /** The token to fence writes with, or null when this process does not lead. */
  readonly leadership: Leadership;
  /** Win (or adopt) one run's coordinator lease and return its coordinator, or who holds it (one invocation's worth). */
  openRunCoordinator(
    runId: string,
    o: {
      readonly bus?: EventBus;
      readonly queue?: WorkQueue;
      readonly watch?: HeartbeatWatch;
      readonly onFenced?: (err: FencedError) => void;
      readonly logger?: Logger;
    },
  ): Promise<OpenedCoordinator>;
  /** A long-lived leader's coordinators: one per open run, kept while it leads. */
  runCoordinators(o: Pick<RunCoordinatorsOptions, 'isLeader' | 'queueFor' | 'deadLettersFor' | 'onSteal' | 'retention'>): RunCoordinators;
  /** The HTTP API over these stores (or `over`: the same ports inside one request's transaction). */
  api(o: { readonly workQueue: ApiDeps['workQueue']; readonly over?: Pick<ApiDeps, 'engine' | 'leases' | 'ledger'> }): ReturnType<typeof apiHandler>;
  close(): Promise<void>;
}

/** The promotion elector the configuration names, and how a leadership check reads it. */
async function election(
  c: ControlPlaneConfig,
  stores: StoreBundle,
  timings: ReturnType<typeof runtimeLeaseTimings>,
  logger: Logger,
): Promise<{ elector: LeaderElector; leadership: Leadership }> {
  const meta = c.leaderMeta ?? { hostname: null, apiUrl: null };
  const callbacks = c.callbacks?.(stores) ?? {};
  const e = c.election;
  if (e.kind === 'static') {
    const pinned = await pinStaticLeader(stores.leases, c.holderId, { ...meta, ...callbacks });
    return { elector: pinned, leadership: leadershipOf(pinned) };
  }
  if (e.kind === 'advisory-lock') {
    const locked = new AdvisoryLockElector({
      holderId: c.holderId,
      name: PROMOTION_LEASE,
      retryIntervalMs: c.timings.retryIntervalMs,
      ...meta,
      connection: e.connection,
      logger,
      ...callbacks,
    });
    return { elector: locked, leadership: leadershipOf(locked) };
  }
  const leased = new LeaseElector(stores.leases, {
    name: PROMOTION_LEASE,
    holderId: c.holderId,
    ...meta,
    ...timings,
    ...(e.isLeaderCacheMs === undefined ? {} : { isLeaderCacheMs: e.isLeaderCacheMs }),
    logger,
    ...callbacks,
  });
  return { elector: leased, leadership: e.loop ? leadershipOf(leased) : campaignEachTime(leased) };
}

/** Opens (and for PostgreSQL, migrates) the store and wires the control plane over it; nothing runs until the elector is started. */
export async function openControlPlane(c: ControlPlaneConfig): Promise<ControlPlane> {
  const logger = c.logger ?? silentLogger;
  const unreachable = targetOutboundIssues(c.targets ?? {}, c.outbound ?? OutboundPolicy.none());
  if (unreachable.length) throw new ConfigError('actuation targets', unreachable);
  const timings = runtimeLeaseTimings(c.timings);
  const stores = await openStores(c.store);
  let chosen: Awaited<ReturnType<typeof election>>;
  try {
    chosen = await election(c, stores, timings, logger);
  } catch (err) {
    await stores.close();
    throw err;
  }
  const { elector, leadership } = chosen;
  const targets = c.targets ?? {};
  const outbound = c.outbound ?? OutboundPolicy.none();
  const actuators = c.actuators ?? actuatorsFor(targets, { outbound, ...(c.secrets ? { secrets: c.secrets } : {}) });
  const gateProviders = c.gateProviders ?? defaultGateProviders({ outbound, ...(c.secrets ? { secrets: c.secrets } : {}) });
  // Always: a spec's post-rollout hooks are sent through it even where no target is declared.
  const actuation = new Actuation(stores.rollouts, actuators, systemClock, logger, gateProviders.webhook);
  const engine = new RolloutEngine({ store: stores.rollouts, bus: c.bus, logger, actuation });
  const assignmentReads = new AssignmentReads(c.assignmentReadMs ?? 0);
  const gateReader = new GateReader(gateProviders, stores.rollouts, { logger });
  return {
    stores,
    engine,
    gateReader,
    registry: new WorkerRegistry(stores.registry),
    elector,
    leadership,
    openRunCoordinator: (runId, o) =>
      openRunCoordinator({
        runId,
        leases: stores.runLeases(runId),
        holderId: c.holderId,
        timings,
        ledger: stores.ledger,
        bus: o.bus ?? c.bus,
        ...(o.watch ? { watch: o.watch } : {}),
        ...(o.queue ? { queue: o.queue } : {}),
        ...(o.onFenced ? { onFenced: o.onFenced } : {}),
        // The coordinator Lambda's sandboxes share the stack's holder id: a cold one adopts the lease another renewed.
        readFirst: true,
        logger: o.logger ?? logger,
      }),
    runCoordinators: (o) =>
      new RunCoordinators({ holderId: c.holderId, ledger: stores.ledger, runLeases: stores.runLeases, timings, bus: c.bus, logger, ...o }),
    api: (o) => {
      const over = o.over ?? { engine, leases: stores.leases, ledger: stores.ledger };
      return apiHandler({
        nodeId: c.holderId,
        leadership,
        workQueue: o.workQueue,
        outbound,
        targets,
        assignmentReads,
        gateNamespaces: c.gateNamespaces ?? null,
        gateReader,
        ...over,
      });
    },
    close: () => stores.close(),
  };
}
