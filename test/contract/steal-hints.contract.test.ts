/**
 * Steal hints on DynamoDB (shared/ledger/steal-hint.ts): an idle fleet's asks
 * read one small record, not the running set. What must hold: while the hint
 * is fresh no ask reads the running set; once stale, one ask rebuilds it
 * however many come together; two thieves never take the same victim's
 * entry; an item the victim started after the hint was built stays with it.
 */
import { describe, expect, it } from 'vitest';
import { DynamoLedgerStore } from '../../shared/adapters/dynamodb/ledger-store.js';
import { DynamoRunLeaseStore } from '../../shared/adapters/dynamodb/run-lease-store.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { Coordinator } from '../../shared/ledger/coordinator.js';
import { STEAL_HINT_FRESH_MS } from '../../shared/ledger/steal-hint.js';
import { coordinatorLease, type LedgerStore } from '../../shared/ledger/store.js';
import { claim, start } from '../../shared/ledger/transitions.js';
import { dynamoTable, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

/** The real store, counting how often the running set is read (its index entries: what a rebuild reads). */
function counting(ledger: DynamoLedgerStore): { ledger: LedgerStore; reads: () => number } {
  let reads = 0;
  const counted = new Proxy(ledger, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if ((prop === 'holders' || prop === 'running') && typeof value === 'function') {
        return (...args: unknown[]) => {
          reads++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { ledger: counted, reads: () => reads };
}

describe('steal hints on dynamodb', () => {
  async function setup(n: number) {
    const t = await dynamoTable();
    const clock = new ManualClock();
    const store = new DynamoLedgerStore(t.doc, t.table);
    const runId = uniqueName('hinted');
    await store.createRun(runId, {}, clock.now(), { shards: 4 });
    const { ids } = await store.enqueue(
      runId,
      Array.from({ length: n }, (_, i) => ({ i })),
      clock.now(),
    );
    const elector = new LeaseElector(new DynamoRunLeaseStore(t.doc, t.table, runId), { name: coordinatorLease(runId), holderId: 'c', clock, ...LEASE });
    await elector.campaign();
    const { ledger, reads } = counting(store);
    const coordinator = new Coordinator({ runId, ledger, elector, bus: new InProcessBus(), failureTimeoutMs: LEASE.ttlMs, clock });
    const claimAll = async (slice: readonly string[], worker: string) => {
      for (const id of slice) expect((await store.cas(claim(runId, id, worker, 0, clock.now()), clock.now())).ok).toBe(true);
    };
    const settled = async (running: number) => expect.poll(async () => (await store.running(runId)).length, { interval: 20, timeout: 5_000 }).toBe(running);
    return { t, clock, store, runId, ids, coordinator, reads, claimAll, settled };
  }

  it('with every set empty, a fleet’s asks read the running set once per fresh period, and find nothing', async () => {
    const { t, clock, coordinator, reads } = await setup(0);
    try {
      for (let i = 0; i < 20; i++) expect((await coordinator.stealFor(`idle-${i}`)).items).toEqual([]);
      expect(reads()).toBe(1);
      clock.advance(STEAL_HINT_FRESH_MS);
      // Stale: the asks arriving together rebuild it once between them.
      const notices = await Promise.all(Array.from({ length: 10 }, (_, i) => coordinator.stealFor(`idle-${i}`)));
      expect(notices.every((n) => n.items.length === 0)).toBe(true);
      expect(reads()).toBe(2);
    } finally {
      await t.close();
    }
  });

  it('two thieves asking together take different victims; the busiest goes first', async () => {
    const { t, ids, coordinator, claimAll, settled } = await setup(31);
    try {
      await claimAll(ids.slice(0, 20), 'busy');
      await claimAll(ids.slice(20, 30), 'less');
      await claimAll(ids.slice(30), 'holder');
      await settled(31);
      // Asks that meet a rebuild under way answer from the hint there was (none yet): build it first.
      expect((await coordinator.stealFor('holder')).items).toEqual([]);
      const [one, two] = await Promise.all([coordinator.stealFor('t1'), coordinator.stealFor('t2')]);
      expect(new Set([one.victim, two.victim])).toEqual(new Set(['busy', 'less']));
      const from = (victim: string) => [one, two].find((n) => n.victim === victim)!.items;
      expect(from('busy')).toHaveLength(10);
      expect(from('less')).toHaveLength(5);
      expect(new Set([...from('busy'), ...from('less')]).size).toBe(15);
      // Then the last entry (the asker that built the hint holds one item); after it, nothing until the hint is rebuilt.
      expect(await coordinator.stealFor('t3')).toMatchObject({ victim: 'holder', items: [ids[30]] });
      expect((await coordinator.stealFor('t4')).items).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('an item the victim started after the hint was built stays with it', async () => {
    const { t, store, runId, ids, coordinator, claimAll, settled } = await setup(9);
    try {
      await claimAll(ids.slice(0, 8), 'victim');
      await claimAll(ids.slice(8), 'holder');
      await settled(9);
      // An ask of a worker that still has a backlog builds the hint and gets nothing.
      expect((await coordinator.stealFor('holder')).items).toEqual([]);
      // Then the victim starts everything before a thief's ask, answered from that (fresh) hint.
      for (const id of ids.slice(0, 8)) expect((await store.cas(start(runId, id, 'victim', Date.now()), Date.now())).ok).toBe(true);
      const notice = await coordinator.stealFor('thief');
      expect(notice.victim).toBe('victim');
      expect(notice.items).toEqual([]);
      for (const id of ids.slice(0, 8)) expect(await store.get(runId, id)).toMatchObject({ state: 'running', worker: 'victim', started: true });
    } finally {
      await t.close();
    }
  });
});
