import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { EventBridgeBus } from '../shared/events/eventbridge.js';
import type { EventBus } from '../shared/events/bus.js';
import { LeaseElector } from '../shared/lease/elector.js';
import { FencedError } from '../shared/lease/fencing.js';
import { errorMessage } from '../shared/log.js';
import { coordinatorRequest, type CoordinatorReply } from '../shared/ledger/coordinator-client.js';
import { Coordinator } from '../shared/ledger/coordinator.js';
import { coordinatorLease } from '../shared/ledger/store.js';
import type { WorkQueue } from '../shared/queue/port.js';
import { sqsClient } from '../shared/queue/sqs/connect.js';
import { SqsWorkQueue } from '../shared/queue/sqs/queue.js';
import { lazy, loggerPort, runtimeFrom, type Runtime } from './runtime.js';

/**
 * The coordinator of a run as a Lambda. Every invocation is a stateless
 * restart: it campaigns for `coordinator:<runId>` (same holder for every
 * invocation of this stack, so it adopts its own lease), then serves one
 * request on the ledger:
 *   {"action":"steal","runId","workerId"}  an idle worker asks for work
 *   {"action":"scan","runId"}              failure scan + dead letters of one run
 *   {"action":"scan-all"}                  the same for every open run (the schedule)
 * Not the coordinator (another stack holds the lease): `{leader:false}`.
 * Deposed mid-request: one coordinator_fenced event, then the process exits
 * so the sandbox is not reused.
 */
export interface CoordinatorHandlerOptions {
  bus?: EventBus;
  queue?: (runtime: Runtime) => { work: WorkQueue; dlq: WorkQueue | null };
  /** Default: exit the process (the Lambda sandbox is discarded). */
  onFenced?: (err: FencedError) => void;
}

function sqsQueues(): { work: WorkQueue; dlq: WorkQueue | null } {
  const url = process.env.ROLLOUT_WORK_QUEUE_URL;
  if (!url) throw new Error('invalid environment config: ROLLOUT_WORK_QUEUE_URL: required for the coordinator');
  const sqs = sqsClient();
  const dlq = process.env.ROLLOUT_WORK_DLQ_URL;
  return { work: new SqsWorkQueue(sqs, url), dlq: dlq ? new SqsWorkQueue(sqs, dlq) : null };
}

export function coordinatorHandler(
  runtime: () => Promise<Runtime>,
  options: CoordinatorHandlerOptions = {},
  logger = new Logger({ serviceName: 'coordinator' }),
  metrics = new Metrics({ namespace: 'Rollout', serviceName: 'coordinator' }),
) {
  type Reply = CoordinatorReply & { scanned?: { repended: string[]; failed: string[] } };

  /** One run's request: win (or adopt) coordinator:<run>, then act under its fence. */
  async function serve(rt: Runtime, req: { action: 'steal'; runId: string; workerId: string } | { action: 'scan'; runId: string }): Promise<Reply> {
    const elector = new LeaseElector(rt.runLeases(req.runId), {
      name: coordinatorLease(req.runId),
      holderId: rt.env.ROLLOUT_NODE_ID,
      ttlMs: rt.env.ROLLOUT_LEASE_TTL_MS,
      renewIntervalMs: rt.env.ROLLOUT_LEASE_RENEW_MS,
      retryIntervalMs: rt.env.ROLLOUT_LEASE_RETRY_MS,
    });
    const won = await elector.campaign();
    if (!won.leader) {
      metrics.addMetric('NotCoordinator', MetricUnit.Count, 1);
      return { leader: false, holder: won.record?.holder ?? null };
    }
    const queues = (options.queue ?? sqsQueues)(rt);
    const coordinator = new Coordinator({
      runId: req.runId,
      ledger: rt.ledger,
      elector,
      bus: options.bus ?? new EventBridgeBus(rt.env.ROLLOUT_EVENT_BUS),
      failureTimeoutMs: rt.env.ROLLOUT_LEASE_TTL_MS,
      queue: queues.work,
      logger: loggerPort(logger),
      onFenced: options.onFenced ?? (() => setImmediate(() => process.exit(75))),
    });
    if (req.action === 'steal') {
      const notice = await coordinator.stealFor(req.workerId);
      metrics.addMetric('ItemsStolen', MetricUnit.Count, notice.items.length);
      logger.info('steal', { runId: req.runId, thief: req.workerId, victim: notice.victim, items: notice.items.length, epoch: notice.epoch });
      return { leader: true, notice: { ...notice, items: [...notice.items] } };
    }
    const repended = await coordinator.failureScan();
    const failed = queues.dlq ? (await coordinator.failDeadLetters(queues.dlq)).failed : [];
    metrics.addMetric('ItemsRepended', MetricUnit.Count, repended.length);
    metrics.addMetric('ItemsFailed', MetricUnit.Count, failed.length);
    return { leader: true, notice: { epoch: elector.token()!.epoch, victim: null, items: [] }, scanned: { repended, failed } };
  }

  return async (event: unknown): Promise<Reply> => {
    try {
      const parsed = coordinatorRequest.safeParse(event);
      if (!parsed.success) throw new TypeError(`invalid coordinator request: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'request'}: ${i.message}`).join('; ')}`);
      const req = parsed.data;
      const rt = await runtime();
      if (req.action === 'scan-all') {
        // The schedule: every open run, one after another (each its own lease and fence).
        const scanned = { repended: [] as string[], failed: [] as string[] };
        for (const runId of await rt.ledger.openRuns()) {
          const reply = await serve(rt, { action: 'scan', runId });
          scanned.repended.push(...(reply.scanned?.repended ?? []));
          scanned.failed.push(...(reply.scanned?.failed ?? []));
        }
        return { leader: true, notice: { epoch: 0, victim: null, items: [] }, scanned };
      }
      return await serve(rt, req);
    } catch (err) {
      metrics.addMetric(err instanceof FencedError ? 'Fenced' : 'Errors', MetricUnit.Count, 1);
      logger.error('coordinator request failed', { error: errorMessage(err) });
      throw err;
    } finally {
      metrics.publishStoredMetrics();
    }
  };
}

export const handler = coordinatorHandler(lazy(() => runtimeFrom(process.env)));
