/**
 * RoutedWorkQueue: each run's messages to the queue it is routed to (a worker
 * fleet's own), every other run's to the shared queue; receiving and
 * settling stay the shared queue's.
 */
import { describe, expect, it } from 'vitest';
import type { QueueMessage, WorkQueue } from '../../shared/queue/port.js';
import { RoutedWorkQueue } from '../../shared/queue/routed.js';
import { sqsWorkQueueFrom } from '../../functions/work-queue.js';

/** A queue that records what is asked of it. */
class Recording implements WorkQueue {
  readonly calls: string[] = [];
  constructor(private readonly name: string) {}
  send(runId: string, itemIds: readonly string[]) {
    this.calls.push(`send ${runId} ${itemIds.join(',')}`);
    return Promise.resolve();
  }
  receive(max: number) {
    this.calls.push(`receive ${max}`);
    return Promise.resolve([{ runId: 'r', itemId: 'i', receipt: this.name, receiveCount: 1 }]);
  }
  delete(m: QueueMessage) {
    this.calls.push(`delete ${m.receipt}`);
    return Promise.resolve();
  }
  deleteMany(ms: readonly QueueMessage[]) {
    this.calls.push(`deleteMany ${ms.length}`);
    return Promise.resolve();
  }
  extend(m: QueueMessage, seconds: number) {
    this.calls.push(`extend ${m.receipt} ${seconds}`);
    return Promise.resolve();
  }
  release(m: QueueMessage) {
    this.calls.push(`release ${m.receipt}`);
    return Promise.resolve();
  }
}

describe('RoutedWorkQueue', () => {
  it('sends a routed run to its queue and any other run to the shared one', async () => {
    const [shared, nightly, hourly] = [new Recording('shared'), new Recording('nightly'), new Recording('hourly')];
    const q = new RoutedWorkQueue(
      new Map<string, WorkQueue>([
        ['nightly', nightly],
        ['hourly', hourly],
      ]),
      shared,
    );
    await q.send('nightly', ['a', 'b']);
    await q.send('hourly', ['c']);
    await q.send('adhoc', ['d']);
    expect(nightly.calls).toEqual(['send nightly a,b']);
    expect(hourly.calls).toEqual(['send hourly c']);
    expect(shared.calls).toEqual(['send adhoc d']);
  });

  it('receives and settles on the shared queue only', async () => {
    const [shared, nightly] = [new Recording('shared'), new Recording('nightly')];
    const q = new RoutedWorkQueue(new Map([['nightly', nightly]]), shared);
    const [m] = await q.receive(10, 0);
    await q.extend(m!, 60);
    await q.release(m!);
    await q.delete(m!);
    await q.deleteMany([m!]);
    expect(shared.calls).toEqual(['receive 10', 'extend shared 60', 'release shared', 'delete shared', 'deleteMany 1']);
    expect(nightly.calls).toEqual([]);
  });

  it('refuses a ledger-backed queue, which has no messages to route', () => {
    const ledger = Object.assign(new Recording('ledger'), { deliversFromLedger: true });
    expect(() => new RoutedWorkQueue(new Map([['r', ledger]]), new Recording('shared'))).toThrow(/ledger-backed queue/);
    expect(() => new RoutedWorkQueue(new Map(), ledger)).toThrow(/ledger-backed queue/);
  });
});

describe('the functions’ work queue (ROLLOUT_RUN_QUEUES)', () => {
  const shared = 'https://sqs.eu-west-1.amazonaws.com/123456789012/work';
  const fleet = 'https://sqs.eu-west-1.amazonaws.com/123456789012/fleet-a';
  const urlOf = (q: WorkQueue) => (q as unknown as { queueUrl: string }).queueUrl;

  it('routes each named run to its queue and any other to the shared one; without routes, the shared queue alone', () => {
    const routed = sqsWorkQueueFrom(
      { ROLLOUT_WORK_QUEUE_URL: shared, ROLLOUT_RUN_QUEUES: JSON.stringify({ nightly: fleet, hourly: fleet }) },
      'to create runs',
    );
    expect(routed).toBeInstanceOf(RoutedWorkQueue);
    const r = routed as RoutedWorkQueue;
    expect([urlOf(r.queueFor('nightly')), urlOf(r.queueFor('hourly')), urlOf(r.queueFor('adhoc'))]).toEqual([fleet, fleet, shared]);
    // One client per queue URL, not per run.
    expect(r.queueFor('nightly')).toBe(r.queueFor('hourly'));
    const plain = sqsWorkQueueFrom({ ROLLOUT_WORK_QUEUE_URL: shared, ROLLOUT_RUN_QUEUES: '{}' }, 'to create runs');
    expect(plain).not.toBeInstanceOf(RoutedWorkQueue);
    expect(urlOf(plain)).toBe(shared);
  });

  it('says what is missing or malformed, naming the variable', () => {
    expect(() => sqsWorkQueueFrom({}, 'to create runs')).toThrow('invalid environment config: ROLLOUT_WORK_QUEUE_URL: required to create runs');
    expect(() => sqsWorkQueueFrom({ ROLLOUT_WORK_QUEUE_URL: shared, ROLLOUT_RUN_QUEUES: '{"r":1}' }, 'x')).toThrow(/ROLLOUT_RUN_QUEUES: r: /);
  });
});
