import type { Logger } from '@aws-lambda-powertools/logger';
import { lambdaLogger } from './log.js';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { EventBus } from '../shared/events/bus.js';
import { FencedError } from '../shared/lease/fencing.js';
import { errorMessage } from '../shared/log.js';
import { coordinatorRequest, type CoordinatorReply } from '../shared/ledger/coordinator-protocol.js';
import { type ScanReport } from '../shared/ledger/coordinator.js';
import { HeartbeatWatch } from '../shared/ledger/staleness.js';
import type { WorkQueue } from '../shared/queue/port.js';
import { sqsClient } from '../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../shared/adapters/sqs/queue.js';
import { FigureMetrics } from './figures.js';
import { instrumented, publishIfAny } from './handler.js';
import { labelValue } from '../shared/api/figures.js';
import { lazy, loggerPort, runtimeFrom, traced, type Runtime } from './runtime.js';
import type { OpenedCoordinator } from '../shared/ledger/open.js';

/**
 * The coordinator of a run as a Lambda. Every invocation is a stateless
 * restart: it campaigns for `coordinator:<runId>` (same holder for every
 * invocation of this stack, so it adopts its own lease), then serves one
 * request on the ledger:
 *   {"action":"steal","runId","workerId"}  an idle worker asks for work
 *   {"action":"scan","runId"}              scan of one run: silent workers' items re-pended,
 *                                          poison failed, items left without a message sent
 *   {"action":"scan-all"}                  the same for every open run (the schedule)
 * Dead letters have their own trigger (dead-letters.ts, on the work DLQ).
 * Not the coordinator (another stack holds the lease): `{leader:false}`.
 * Deposed mid-request: one coordinator_fenced event, then the process exits
 * so the sandbox is not reused.
 */
export interface CoordinatorHandlerOptions {
  bus?: EventBus;
  /** Where re-pended items go back to. Default: ROLLOUT_WORK_QUEUE_URL on SQS. */
  queue?: (runtime: Runtime) => WorkQueue;
  /** Default: exit the process (the Lambda sandbox is discarded). */
  onFenced?: (err: FencedError) => void;
}

function sqsWorkQueue(): WorkQueue {
  const url = process.env.ROLLOUT_WORK_QUEUE_URL;
  if (!url) throw new Error('invalid environment config: ROLLOUT_WORK_QUEUE_URL: required for the coordinator');
  return new SqsWorkQueue(traced(sqsClient()), url);
}

/**
 * Heartbeats seen by this sandbox, kept across invocations: a warm sandbox
 * judges a silent worker on its own clock (staleness.ts); a cold one falls
 * back on the heartbeat's stamp with the skew margin.
 */
const watch = new HeartbeatWatch();

/** This stack's coordinator of `runId` (its node id is the holder, so every invocation adopts the same lease), or who holds it instead. */
export function openCoordinator(rt: Runtime, runId: string, o: { bus?: EventBus; queue?: WorkQueue; onFenced?: (err: FencedError) => void; logger: Logger }): Promise<OpenedCoordinator> {
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
  figures = new FigureMetrics(),
) {
  type Reply = CoordinatorReply & { scanned?: ScanReport };

  /** One run's request, under its coordinator lease. */
  async function serve(rt: Runtime, req: { action: 'steal'; runId: string; workerId: string } | { action: 'scan'; runId: string }): Promise<Reply> {
    const opened = await openCoordinator(rt, req.runId, { ...(options.bus ? { bus: options.bus } : {}), queue: (options.queue ?? sqsWorkQueue)(rt), ...(options.onFenced ? { onFenced: options.onFenced } : {}), logger });
    if (!opened.coordinator) {
      metrics.addMetric('NotCoordinator', MetricUnit.Count, 1);
      return { leader: false, holder: opened.holder };
    }
    const { coordinator, epoch } = opened;
    if (req.action === 'steal') {
      const notice = await coordinator.stealFor(req.workerId);
      if (notice.items.length) metrics.addMetric('ItemsStolen', MetricUnit.Count, notice.items.length);
      // Per run, under a node's name for it; here the items this request took (read with Sum), there the run's total so far.
      figures.count('rollout_run_steals', { run: labelValue(req.runId) }, notice.items.length);
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

  return instrumented<unknown, Reply>(
    {
      logger,
      metrics,
      failure: 'coordinator request failed',
      atEnd: () => {
        figures.flush();
        publishIfAny(metrics);
      },
      known: (err) => {
        if (!(err instanceof FencedError)) return null;
        figures.countStack('LeasesLost', 1);
        return { metric: 'Fenced', message: 'coordinator request failed', fields: { error: errorMessage(err) } };
      },
    },
    async (event) => {
      const parsed = coordinatorRequest.safeParse(event);
      if (!parsed.success) throw new TypeError(`invalid coordinator request: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'request'}: ${i.message}`).join('; ')}`);
      const req = parsed.data;
      const rt = await runtime();
      if (req.action !== 'scan-all') return serve(rt, req);
      // The schedule: every open run, one after another (each its own lease and fence).
      const failedBy = { attempts: 0, cancelled: 0, dead_letter: 0 };
      const scanned: ScanReport = { repended: [], failed: [], resent: [], failedBy };
      let throttledRuns = 0;
      for (const runId of await rt.stores.ledger.openRuns()) {
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
}

export const handler = coordinatorHandler(lazy(() => runtimeFrom(process.env)));
