/**
 * spot_drain_completes_within_lead_time, for AWS (notice 120 s, drain 60 s)
 * and GCP (30 s, 15 s): a worker holding items, one of them mid-run on a slow
 * backend, gets a preemption notice through the ComputeHint port; the drain
 * gives everything back, and another worker completes the run — nothing lost.
 * Whether a drain is inside its deadline is judged on the drain's clock,
 * which the test moves: each step "takes" a set time, so the verdict never
 * depends on this machine's speed (how fast a real drain is belongs in
 * `npm run bench -- drain`).
 */
import { CreateQueueCommand, DeleteQueueCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROVIDER_DEADLINES, SimulatedComputeHint, type PreemptionNotice, type Provider } from '../../shared/drain/compute-hint.js';
import { drain, type DrainReport } from '../../shared/drain/drain.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { openBackend, uniqueName, type LeaseBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { until } from '../support/gate.js';

describe.each(['postgres', 'dynamodb'] as const)('spot drain on %s with SQS', (backendName) => {
  let backend: LeaseBackend;
  const sqs = sqsClient();
  const queues: string[] = [];
  beforeAll(async () => {
    backend = await openBackend(backendName);
  });
  afterAll(async () => {
    for (const q of queues) await sqs.send(new DeleteQueueCommand({ QueueUrl: q })).catch(() => undefined);
    await backend?.close();
  });

  async function setup(n: number) {
    const runId = uniqueName('run');
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('q'), Attributes: { VisibilityTimeout: '60' } }))).QueueUrl!;
    queues.push(url);
    const queue = new SqsWorkQueue(sqs, url);
    await backend.ledger.createRun(runId, {}, Date.now());
    const { ids } = await backend.ledger.enqueue(
      runId,
      Array.from({ length: n }, (_, i) => ({ runId, i })),
      Date.now(),
    );
    await queue.send(runId, ids);
    return { runId, ids, queue };
  }
  const worker = (runId: string, id: string, queue: SqsWorkQueue, durationMs: number) =>
    new Worker({ runId, workerId: id, ledger: backend.ledger, queue, backend: mockBackend({ durationMs }), waitSeconds: 0, receiveBatch: 10 });

  describe.each(['aws', 'gcp'] as Provider[])('spot_drain_completes_within_lead_time (%s)', (provider) => {
    const { drainDeadlineMs } = PROVIDER_DEADLINES[provider];
    /**
     * A worker holding a running item and a backlog is preempted; its drain's
     * steps take `stepsMs` in all on the drain's clock (nack, snapshot, deregister).
     */
    async function preempted(stepsMs: number) {
      const { runId, ids, queue } = await setup(12);
      const doomed = worker(runId, 'doomed', queue, 60_000); // each item would take a minute
      await doomed.pull();
      const held = doomed.held.length;
      expect(held).toBeGreaterThan(1);
      const running = doomed.step(); // starts the first item and hangs in the backend
      await until('an item is started', async () => (await backend.ledger.running(runId)).some((i) => i.started), 5_000, 20);

      const clock = new ManualClock(Date.now());
      const step = stepsMs / 3;
      const hint = new SimulatedComputeHint();
      const registry = new Set(['doomed']);
      let exited = false;
      const report = new Promise<DrainReport>((resolve) =>
        hint.onPreemption((notice) => {
          void drain(
            {
              stopAndNack: async () => {
                const nacked = await doomed.drain();
                clock.advance(step);
                return nacked;
              },
              deregister: () => Promise.resolve(void (registry.delete('doomed'), clock.advance(step))),
            },
            notice,
            {
              clock,
              snapshot: {
                estimatedCostMs: 5,
                take: (signal) => {
                  clock.advance(step);
                  return signal.aborted ? Promise.reject(new Error('aborted')) : Promise.resolve();
                },
              },
              exit: () => (exited = true),
            },
          ).then(resolve);
        }),
      );
      const notice: PreemptionNotice = { provider, instanceId: 'i-0abc1234', kind: 'interruption', receivedAt: clock.now() };
      hint.preempt(notice);
      const r = await report;
      await running;
      return { r, held, runId, ids, queue, exited, registry };
    }

    it('a drain whose steps fit the deadline reports it inside, gives back the running item and the whole backlog, and another worker finishes the run', async () => {
      const { r, held, runId, ids, queue, exited, registry } = await preempted(drainDeadlineMs - 3);
      expect(r.deadlineMs).toBe(drainDeadlineMs); // the provider's deadline, not the other's
      expect(r.elapsedMs).toBe(drainDeadlineMs - 3);
      expect(r.withinDeadline).toBe(true);
      expect(r.steps).toEqual(['stop_pulling_and_nack', 'snapshot', 'deregister', 'exit']);
      expect(r.nacked).toHaveLength(held); // the running item and the whole backlog
      expect(r.problems).toEqual([]);
      expect(exited).toBe(true);
      expect(registry.has('doomed')).toBe(false);

      // Everything it held is Pending again and on the queue: another worker finishes the run.
      const rescuer = worker(runId, 'rescuer', queue, 0);
      for (let i = 0; i < 100 && (await backend.ledger.counts(runId)).done < ids.length; i++) await rescuer.step();
      expect(await backend.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: ids.length, failed: 0 });
      expect(rescuer.stats.done).toBe(ids.length);
    });

    it('a drain whose steps overrun the deadline says so, and still gives everything back', async () => {
      const { r, held, runId } = await preempted(drainDeadlineMs + 3);
      expect(r.elapsedMs).toBe(drainDeadlineMs + 3);
      expect(r.withinDeadline).toBe(false);
      expect(r.steps).toEqual(['stop_pulling_and_nack', 'snapshot', 'deregister', 'exit']);
      expect(r.nacked).toHaveLength(held);
      expect(await backend.ledger.counts(runId)).toMatchObject({ pending: 12, running: 0 });
    });
  });

  it('a drain short of time skips the snapshot and says so; what it gave back is still not lost', async () => {
    const { runId, queue } = await setup(3);
    const w = worker(runId, 'late', queue, 0);
    await w.pull();
    const clock = new ManualClock(Date.now());
    const deadline = PROVIDER_DEADLINES.gcp.drainDeadlineMs;
    const r = await drain(
      { stopAndNack: () => w.drain(), deregister: () => Promise.resolve() },
      { provider: 'gcp', instanceId: 'gce-1', kind: 'interruption', receivedAt: clock.now() - deadline + 200 },
      {
        clock,
        snapshot: { estimatedCostMs: 10_000, take: () => Promise.reject(new Error('must not be called')) },
      },
    );
    expect(r.steps).toEqual(['stop_pulling_and_nack', 'snapshot_skipped', 'deregister', 'exit']);
    expect(r.problems).toEqual(['snapshot skipped: 200 ms left, it needs ~10000 ms']);
    expect(r.withinDeadline).toBe(true);
    expect(r.nacked).toHaveLength(3);
    expect((await backend.ledger.counts(runId)).pending).toBe(3);
  });
});
