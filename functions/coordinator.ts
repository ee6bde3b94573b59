import type { Logger } from '@aws-lambda-powertools/logger';
import { lambdaLogger } from './log.js';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import type { EventBus } from '../shared/events/bus.js';
import { FencedError } from '../shared/lease/fencing.js';
import { errorMessage } from '../shared/log.js';
import { coordinatorRequest, type CoordinatorReply, type CoordinatorRequest } from '../shared/ledger/coordinator-protocol.js';
import { type ScanReport } from '../shared/ledger/coordinator.js';
import { MAX_ATTEMPTS } from '../shared/ledger/model.js';
import { HeartbeatWatch } from '../shared/ledger/staleness.js';
import type { WorkQueue } from '../shared/queue/port.js';
import { sqsClient } from '../shared/adapters/sqs/connect.js';
import { sqsWorkQueueFrom } from './work-queue.js';
import { CatalogueMetrics } from './metrics.js';
import { instrumented, publishIfAny } from './handler.js';
import { labelValue } from '../shared/api/metrics.js';
import { jsonVariable } from '../shared/runtimes/lambda-env.js';
import { invocationScoped, loggerPort, runtimeFrom, traced, type Runtime } from './runtime.js';
import type { OpenedCoordinator } from '../shared/ledger/open.js';
import { BoundedMap } from '../shared/bounded-map.js';
import { DAY_MS, PRUNE_RUN_ITEMS } from '../shared/retention.js';
import { activityFlagsFrom, type ActivityFlags } from './activity.js';

/**
 * The coordinator of a run as a Lambda. An invocation holds nothing it cannot
 * rebuild: a cold sandbox campaigns for `coordinator:<runId>` (same holder for
 * every invocation of this stack, so it adopts its own lease: read first, and
 * written only when past half its TTL or not ours), a warm one goes
 * on with the coordinator it opened while its lease is fresh (coordinatorOf),
 * then it serves one request on the ledger:
 *   {"action":"steal","runId","workerId"}  an idle worker asks for work
 *   {"action":"scan","runId"}              scan of one run: silent workers' items re-pended,
 *                                          poison failed, items left without a message sent
 *   {"action":"scan-all"}                  the work DLQ drained (`drainDeadLetters`), then
 *                                          the same scan for every open run (the schedule)
 * Not the coordinator (another stack holds the lease): `{leader:false}`.
 * A worker fleet invokes it through an alias of its own (`fleet-…`,
 * infra/worker-fleet.ts); a request through such an alias is answered only
 * if it is a steal for one of that fleet's runs (`ROLLOUT_COORDINATOR_FLEETS`),
 * for a worker of that run registered on one of the fleet's instances and
 * neither gone nor draining (the run's roster, WorkerRegistry.stealRefusal):
 * scans, the scan of every run and retention are the schedule's.
 * Deposed mid-request: one coordinator_fenced event, then the process exits
 * so the sandbox is not reused.
 *
 * On Aurora the `runs` activity flag comes before the open runs are read
 * (activity.ts): an idle cluster is not woken every minute to find none.
 */
export interface CoordinatorHandlerOptions {
  bus?: EventBus;
  /** Where re-pended items go back to. Default: ROLLOUT_WORK_QUEUE_URL on SQS, routed by run (ROLLOUT_RUN_QUEUES). */
  queue?: (runtime: Runtime) => WorkQueue;
  /** Default: exit the process (the Lambda sandbox is discarded). */
  onFenced?: (err: FencedError) => void;
  /** The work DLQ that `scan-all` drains. Default: ROLLOUT_WORK_DLQ_URL on SQS; none when it is unset. */
  deadLetters?: { readonly sqs: SQSClient; readonly queueUrl: string } | null;
  /** The `runs` flag in front of the open runs' query (the Aurora store); none: every scan reads the database. */
  activity?: ActivityFlags | null;
  /** The work queue's maxReceiveCount, for the reason recorded on a dead letter's item. Default: ROLLOUT_MAX_RECEIVE_COUNT, else MAX_ATTEMPTS. */
  maxReceiveCount?: number;
  /** Each fleet alias and the runs it may ask steals for. Default: ROLLOUT_COORDINATOR_FLEETS (JSON), else none. */
  fleets?: Readonly<Record<string, readonly string[]>>;
}

/** The aliases worker fleets invoke the coordinator through (infra/control-plane.ts names them so). */
export const FLEET_ALIAS_PREFIX = 'fleet-';

const fleetsSchema = z.record(z.string().regex(/^fleet-[A-Za-z0-9_-]+$/), z.array(z.string().min(1)));

export class RefusedRequest extends Error {
  override readonly name = 'RefusedRequest';
}

/** ROLLOUT_COORDINATOR_FLEETS: `{ "<alias>": ["<run>", …] }`; none when unset. */
export function fleetsFrom(env: NodeJS.ProcessEnv): Readonly<Record<string, readonly string[]>> {
  return jsonVariable(env, 'ROLLOUT_COORDINATOR_FLEETS', fleetsSchema) ?? {};
}

/**
 * Whether a request may be served as invoked: through a fleet's alias, only
 * a steal for one of its runs (an alias of that form not listed, nothing at
 * all); unqualified, or through any other qualifier (the schedule, an
 * operator), anything. Who may invoke what is IAM's: a fleet's role is
 * granted its alias and nothing else of the function.
 */
export function refusal(req: CoordinatorRequest, invokedFunctionArn: string | undefined, fleets: Readonly<Record<string, readonly string[]>>): string | null {
  const qualifier = fleetAlias(invokedFunctionArn);
  if (!qualifier) return null;
  const runs = new Map(Object.entries(fleets)).get(qualifier);
  if (!runs) return `alias ${qualifier} serves no worker fleet this stack knows`;
  if (req.action !== 'steal') return `a worker fleet (alias ${qualifier}) may ask for steals only, not ${req.action}`;
  if (!runs.includes(req.runId)) return `worker fleet alias ${qualifier} serves runs ${runs.join(', ')}, not ${req.runId}`;
  return null;
}

/** The fleet alias a request came through, if any (the qualifier of the invoked ARN). */
export function fleetAlias(invokedFunctionArn: string | undefined): string | null {
  const qualifier = invokedFunctionArn?.split(':')[7];
  return qualifier?.startsWith(FLEET_ALIAS_PREFIX) ? qualifier : null;
}

const deadLetterBody = z.object({ runId: z.string().min(1), itemId: z.string().regex(/^[0-9a-f]{64}$/) }).strict();

export class RetryLater extends Error {
  override readonly name = 'RetryLater';
}

export interface DeadLettersOptions {
  bus?: EventBus;
  onFenced?: (err: FencedError) => void;
  /** The work queue's maxReceiveCount, for the reason recorded on the item. */
  maxReceiveCount?: number;
}

/** What became of one dead letter: its item failed, or the letter dropped (item finished or unknown, or the body malformed). Kept for later: RetryLater. */
export type DeadLetterOutcome = 'failed' | 'dropped' | 'malformed';

/**
 * One dead letter of the work DLQ: its item, if still Pending or Running,
 * becomes Failed with the reason, under the run's coordinator lease. One that
 * cannot be settled now (another stack coordinates the run, the item moved
 * while we looked) throws RetryLater, as does a store that fails: the letter
 * stays in the queue and comes back. A malformed one is logged with its body
 * and dropped: retrying it could never succeed.
 */
export async function settleDeadLetter(
  runtime: () => Promise<Runtime>,
  message: { readonly messageId: string; readonly body: string },
  o: DeadLettersOptions & { readonly logger: Logger; readonly metrics: Metrics; readonly catalogue: CatalogueMetrics },
): Promise<DeadLetterOutcome> {
  let parsed: z.infer<typeof deadLetterBody>;
  try {
    parsed = deadLetterBody.parse(JSON.parse(message.body));
  } catch (err) {
    o.metrics.addMetric('InvalidDeadLetters', MetricUnit.Count, 1);
    o.logger.error('malformed dead letter dropped', { messageId: message.messageId, body: message.body.slice(0, 500), error: errorMessage(err) });
    return 'malformed';
  }
  const opened = await openCoordinator(await runtime(), parsed.runId, {
    ...(o.bus ? { bus: o.bus } : {}),
    ...(o.onFenced ? { onFenced: o.onFenced } : {}),
    logger: o.logger,
  });
  if (!opened.coordinator) throw new RetryLater(`run ${parsed.runId} is coordinated by ${opened.holder ?? 'nobody yet'}`);
  const outcome = await opened.coordinator.failDeadLetter({
    ...parsed,
    receiveCount: o.maxReceiveCount ?? Number(process.env.ROLLOUT_MAX_RECEIVE_COUNT ?? MAX_ATTEMPTS),
  });
  if (outcome === 'moved') throw new RetryLater(`item ${parsed.itemId} moved while its dead letter was handled`);
  o.metrics.addMetric(outcome === 'failed' ? 'ItemsFailed' : 'DeadLettersDropped', MetricUnit.Count, 1);
  // As a node's /metrics counts them, under the same name.
  if (outcome === 'failed') o.catalogue.count('rollout_dead_letters_total', {}, 1);
  o.logger.info(`dead letter ${outcome}`, { runId: parsed.runId, itemId: parsed.itemId });
  return outcome;
}

/** Dead letters settled per scheduled scan, at most: a burst is worked off over the next minutes, leaving time for the runs' scan. */
export const DEAD_LETTERS_PER_SCAN = 500;

/**
 * The work DLQ, drained by the schedule rather than by an event source
 * mapping (whose pollers would long-poll it all month, idle or not): one
 * short poll when it is empty, then batches of 10 until a poll comes back
 * empty. Settled letters are deleted; the others stay, hidden for the DLQ's
 * visibility timeout, and are tried again by a later scan. A letter a short
 * poll missed is found by a later one. The database is touched only when
 * there are letters.
 */
export async function drainDeadLetters(
  dlq: { readonly sqs: SQSClient; readonly queueUrl: string },
  settle: (m: { readonly messageId: string; readonly body: string }) => Promise<DeadLetterOutcome>,
  logger: Logger,
): Promise<{ settled: number; kept: number }> {
  let settled = 0;
  let kept = 0;
  while (settled + kept < DEAD_LETTERS_PER_SCAN) {
    const { Messages } = await dlq.sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }));
    if (!Messages?.length) break;
    const done: { Id: string; ReceiptHandle: string }[] = [];
    for (const m of Messages) {
      try {
        await settle({ messageId: m.MessageId ?? '(no id)', body: m.Body ?? '' });
        done.push({ Id: String(done.length), ReceiptHandle: m.ReceiptHandle! });
      } catch (err) {
        kept++;
        // Fenced: stop here; the process is on its way out, and the letters come back.
        if (err instanceof FencedError) throw err;
        logger.warn('dead letter kept for a later scan', { messageId: m.MessageId, error: errorMessage(err) });
      }
    }
    if (done.length) {
      const res = await dlq.sqs.send(new DeleteMessageBatchCommand({ QueueUrl: dlq.queueUrl, Entries: done }));
      // Not deleted: delivered again and settled again, which finds its item already failed and drops it.
      for (const f of res.Failed ?? []) logger.warn('dead letter settled but not deleted: it comes back', { code: f.Code, error: f.Message });
      settled += done.length;
    }
  }
  return { settled, kept };
}

function sqsDeadLetters(): { sqs: SQSClient; queueUrl: string } | null {
  const url = process.env.ROLLOUT_WORK_DLQ_URL;
  return url ? { sqs: traced(sqsClient()), queueUrl: url } : null;
}

/** Each fleet's runs to its own queue, the others' to the shared one (work-queue.ts). */
function sqsWorkQueue(): WorkQueue {
  return sqsWorkQueueFrom(process.env, 'for the coordinator');
}

/**
 * Heartbeats seen by this sandbox, kept across invocations: a warm sandbox
 * judges a silent worker on its own clock (staleness.ts); a cold one falls
 * back on the heartbeat's stamp with the skew margin.
 */
const watch = new HeartbeatWatch();

/** This stack's coordinator of `runId` (its node id is the holder, so every invocation adopts the same lease), or who holds it instead. */
export function openCoordinator(
  rt: Runtime,
  runId: string,
  o: { bus?: EventBus; queue?: WorkQueue; onFenced?: (err: FencedError) => void; logger: Logger },
): Promise<OpenedCoordinator> {
  return rt.openRunCoordinator(runId, {
    ...(o.bus ? { bus: o.bus } : {}),
    watch,
    ...(o.queue ? { queue: o.queue } : {}),
    logger: loggerPort(o.logger),
    onFenced: o.onFenced ?? (() => setImmediate(() => process.exit(75))),
  });
}

/** A run throttled within this long (by its record) counts as throttled now: two scans' worth. */
const THROTTLED_RECENTLY_MS = 120_000;

export function coordinatorHandler(
  runtime: () => Promise<Runtime>,
  options: CoordinatorHandlerOptions = {},
  logger = lambdaLogger('coordinator'),
  metrics = new Metrics({ namespace: 'Rollout', serviceName: 'coordinator' }),
  catalogue = new CatalogueMetrics(),
) {
  type Reply = CoordinatorReply & { scanned?: ScanReport };
  const deadLetters = options.deadLetters === undefined ? sqsDeadLetters() : options.deadLetters;
  const fleets = options.fleets ?? fleetsFrom(process.env);

  /** One run's request, under its coordinator lease. */
  /**
   * The run coordinators this sandbox opened, kept across invocations while
   * their lease has more than half its TTL left: an ask then neither reads nor
   * writes the lease (every Lambda invocation campaigning made the lease item
   * the hottest of a fleet's idle asks). Past half the TTL it is renewed, one
   * write; deposed, the sandbox exits. Safety does not rest on this: each
   * write is fenced by the store.
   */
  const warm = new WeakMap<Runtime, BoundedMap<string, Extract<OpenedCoordinator, { coordinator: object }>>>();

  async function coordinatorOf(rt: Runtime, runId: string): Promise<OpenedCoordinator> {
    let runs = warm.get(rt);
    if (!runs) warm.set(rt, (runs = new BoundedMap(100)));
    const kept = runs.get(runId);
    if (kept && !kept.coordinator.isFenced && kept.elector.token()) {
      const row = kept.elector.lastObserved();
      if (row && row.expiresAt - Date.now() > (row.expiresAt - row.renewedAt) / 2) return kept;
      if ((await kept.elector.campaign()).leader && kept.elector.token()?.epoch === kept.epoch) return kept;
    }
    runs.delete(runId);
    const opened = await openCoordinator(rt, runId, {
      ...(options.bus ? { bus: options.bus } : {}),
      queue: (options.queue ?? sqsWorkQueue)(rt),
      ...(options.onFenced ? { onFenced: options.onFenced } : {}),
      logger,
    });
    if (opened.coordinator) runs.set(runId, opened);
    return opened;
  }

  async function serve(rt: Runtime, req: { action: 'steal'; runId: string; workerId: string } | { action: 'scan'; runId: string }): Promise<Reply> {
    const opened = await coordinatorOf(rt, req.runId);
    if (!opened.coordinator) {
      metrics.addMetric('NotCoordinator', MetricUnit.Count, 1);
      return { leader: false, holder: opened.holder };
    }
    const { coordinator, epoch } = opened;
    if (req.action === 'steal') {
      const notice = await coordinator.stealFor(req.workerId);
      if (notice.items.length) metrics.addMetric('ItemsStolen', MetricUnit.Count, notice.items.length);
      // Per run, under a node's name for it; here the items this request took (read with Sum), there the run's total so far.
      catalogue.count('rollout_run_steals', { run: labelValue(req.runId) }, notice.items.length);
      logger.info('steal', { runId: req.runId, thief: req.workerId, victim: notice.victim, items: notice.items.length, epoch: notice.epoch });
      return { leader: true, notice: { ...notice, items: [...notice.items] } };
    }
    const scanned = await coordinator.scan();
    // Counted when something happened: a quiet scan publishes no zeros (each metric is billed by the hour it has data).
    if (scanned.repended.length) metrics.addMetric('ItemsRepended', MetricUnit.Count, scanned.repended.length);
    if (scanned.failed.length) metrics.addMetric('ItemsFailed', MetricUnit.Count, scanned.failed.length);
    if (scanned.resent.length) metrics.addMetric('ItemsResent', MetricUnit.Count, scanned.resent.length);
    return { leader: true, notice: { epoch, victim: null, items: [] }, scanned };
  }

  type Invocation = { readonly invokedFunctionArn?: string } | undefined;
  const handle = instrumented<unknown, Reply, Invocation>(
    {
      logger,
      metrics,
      failure: 'coordinator request failed',
      atEnd: () => {
        catalogue.flush();
        publishIfAny(metrics);
      },
      known: (err) => {
        if (err instanceof RefusedRequest) return { metric: 'RefusedRequests', message: 'coordinator request refused', fields: { error: err.message } };
        if (!(err instanceof FencedError)) return null;
        catalogue.countStack('LeasesLost', 1);
        return { metric: 'Fenced', message: 'coordinator request failed', fields: { error: errorMessage(err) } };
      },
    },
    async (event, context) => {
      const parsed = coordinatorRequest.safeParse(event);
      if (!parsed.success)
        throw new TypeError(`invalid coordinator request: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'request'}: ${i.message}`).join('; ')}`);
      const req = parsed.data;
      const refused = refusal(req, context?.invokedFunctionArn, fleets);
      if (refused) throw new RefusedRequest(`coordinator request refused: ${refused}`);
      if (req.action !== 'scan-all') {
        const rt = await runtime();
        // A fleet names the worker it asks for: one of its own in that run, or nothing moves.
        if (req.action === 'steal' && fleetAlias(context?.invokedFunctionArn)) {
          const why = await rt.registry.stealRefusal(req.runId, req.workerId);
          if (why) throw new RefusedRequest(`coordinator request refused: ${why}`);
        }
        return serve(rt, req);
      }
      const failedBy = { attempts: 0, cancelled: 0, dead_letter: 0 };
      const scanned: ScanReport = { repended: [], failed: [], resent: [], failedBy };
      const nothing: Reply = { leader: true, notice: { epoch: 0, victim: null, items: [] }, scanned };
      if (deadLetters) {
        const drained = await drainDeadLetters(deadLetters, (m) => settleDeadLetter(runtime, m, { ...options, logger, metrics, catalogue }), logger);
        if (drained.settled || drained.kept) logger.info('work DLQ drained', drained);
      }
      const probe = options.activity ? await options.activity.probe('runs') : null;
      if (probe?.skip) return nothing;
      const rt = await runtime();
      // The schedule: every open run, one after another (each its own lease and fence).
      const open = await rt.stores.ledger.openRuns();
      // Finished runs past their retention: a bounded batch whenever the database is read (on Aurora at least daily).
      const now = Date.now();
      const pruned = await rt.stores.ledger.pruneRuns(now - rt.env.ROLLOUT_RETAIN_RUNS_DAYS * DAY_MS, PRUNE_RUN_ITEMS, now).catch((err: unknown) => {
        logger.warn('finished runs not pruned this scan', { error: errorMessage(err) });
        return { runs: 0, items: 0 };
      });
      if (pruned.runs || pruned.items) logger.info('finished runs deleted past their retention', { ...pruned, days: rt.env.ROLLOUT_RETAIN_RUNS_DAYS });
      if (!open.length) {
        await probe?.nothingLeft();
        return nothing;
      }
      let throttledRuns = 0;
      for (const runId of open) {
        const reply = await serve(rt, { action: 'scan', runId });
        scanned.repended.push(...(reply.scanned?.repended ?? []));
        scanned.failed.push(...(reply.scanned?.failed ?? []));
        scanned.resent.push(...(reply.scanned?.resent ?? []));
        for (const cause of ['attempts', 'cancelled', 'dead_letter'] as const) failedBy[cause] += reply.scanned?.failedBy[cause] ?? 0;
        // Workers (on EC2, with no metrics of their own) note throttling on the run's record: counted here, once a minute, for the alarm.
        const throttled = (await rt.stores.ledger.getRun(runId))?.throttled;
        if (throttled && Date.now() - throttled.at < THROTTLED_RECENTLY_MS) throttledRuns++;
      }
      if (throttledRuns) metrics.addMetric('RunsThrottled', MetricUnit.Count, throttledRuns);
      return { leader: true, notice: { epoch: 0, victim: null, items: [] }, scanned };
    },
  );
  // Called without a context (a node, the tests): the control plane's own call.
  return (event: unknown, context?: Invocation): Promise<Reply> => handle(event, context);
}

const scoped = invocationScoped(() => runtimeFrom(process.env));
export const handler = scoped.around(coordinatorHandler(scoped.runtime, { activity: activityFlagsFrom(process.env) }));
