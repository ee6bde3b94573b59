/**
 * The status page's reads (StatusReads) on every backend, over one scenario
 * written through the real stores: which rollouts are shown (in flight by
 * their latest change, then the latest finished), their newest transitions
 * without readings, metrics or labels, the newest runs with their figures,
 * each run's newest failures with capped reasons, and the ids no request path
 * reaches.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPglite } from '../../shared/adapters/postgres/connect.js';
import { PostgresRunStats } from '../../shared/adapters/postgres/run-stats.js';
import type { Sql } from '../../shared/adapters/postgres/sql.js';
import type { StatusReads } from '../../shared/api/status-reads.js';
import { openStores, sqlStores, type StoreBundle } from '../../shared/compose/stores.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { ack, claim, reject } from '../../shared/ledger/transitions.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import type { RolloutEvent } from '../../shared/rollout/events.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';
import { BACKENDS, dynamoTable, postgresSchema, uniqueName, type BackendName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const SPEC = parseRolloutSpec({
  target: { service: 'web', version: 'v2', labels: { team: 'payments' } },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 3600 },
    { name: 'all', percent: 100, bakeSeconds: 3600 },
  ],
});
const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

type Stores = Pick<StoreBundle, 'leases' | 'rollouts' | 'ledger' | 'registry' | 'statusReads'> & { readonly sql: Sql | null; close(): Promise<void> };

async function open(name: BackendName): Promise<Stores> {
  switch (name) {
    case 'postgres': {
      const db = await postgresSchema();
      return { ...sqlStores(db.sql), sql: db.sql, close: () => db.close() };
    }
    case 'pglite': {
      const db = await openPglite();
      return { ...sqlStores(db.sql), sql: db.sql, close: () => db.close() };
    }
    case 'dynamodb': {
      // As a runtime opens it (the composition root), on a table of its own.
      const t = await dynamoTable();
      const stores = await openStores({ kind: 'dynamodb', table: t.table, client: t.client });
      return { ...stores, close: () => t.close() };
    }
  }
}

/** An event as the page lists it: its detail without what it carries for the record only. */
function listed(e: RolloutEvent): RolloutEvent {
  const { readings: _r, metrics: _m, labels: _l, ...detail } = e.detail;
  return { ...e, detail };
}

describe.each(BACKENDS)('status page reads on %s', (name) => {
  let s: Stores;
  let reads: StatusReads;
  const clock = new ManualClock();
  const at = (): number => (clock.advance(1_000), clock.now());
  const id = (label: string) => uniqueName(label);
  const [a, b, c, d, e] = ['a', 'b', 'c', 'd', 'e'].map(id);
  const [run1, run2, run3] = ['run1', 'run2', 'run3'].map(id);
  let failedLong = '';
  let failedShort = '';

  beforeAll(async () => {
    s = await open(name);
    reads = s.statusReads;
    const engine = new RolloutEngine({ store: s.rollouts, bus: new InProcessBus(), clock });
    const token = campaignEachTime(new LeaseElector(s.leases, { name: 'promotion_leader', holderId: 'page', clock, ...LEASE }));
    // Created a to e, one a second; then a paused, resumed and paused again, b, c and d aborted in turn: e is the oldest change still running.
    for (const rollout of [a, b, c, d, e]) {
      at();
      await createRollout(engine, { spec: SPEC, actor: 'alice', id: rollout });
    }
    for (const command of ['pause', 'resume', 'pause'] as const) {
      at();
      await runCommand(engine, (await token())!, { rolloutId: a!, command, actor: 'alice', reason: `${command} it` });
    }
    for (const rollout of [b, c, d]) {
      at();
      await runCommand(engine, (await token())!, { rolloutId: rollout!, command: 'abort', actor: 'bob' });
    }

    for (const run of [run1, run2, run3]) await s.ledger.createRun(run!, { page: true }, at());
    const { ids } = await s.ledger.enqueue(run2!, [{ n: 1 }, { n: 2 }, { n: 3 }], at());
    [failedLong, failedShort] = ids as [string, string];
    for (const item of ids) expect((await s.ledger.cas(claim(run2!, item, 'w1', 0, clock.now()), at())).ok).toBe(true);
    expect((await s.ledger.cas(reject(run2!, failedLong, 'w1', `long ${'x'.repeat(600)}`), at())).ok).toBe(true);
    expect((await s.ledger.cas(reject(run2!, failedShort, 'w1', 'boom'), at())).ok).toBe(true);
    expect((await s.ledger.cas(ack(run2!, ids[2]!, 'w1', { ok: true }), at())).ok).toBe(true);

    // Two workers of run2, one of them asked to drain; one of run3, not.
    const worker = (workerId: string, instanceId: string, runId: string) => ({
      workerId,
      instanceId,
      runId,
      provider: 'aws' as const,
      state: 'active' as const,
      registeredAt: clock.now(),
      heartbeatAt: clock.now(),
      drain: null,
      goneAt: null,
    });
    await s.registry.register(worker('w1', 'i-1', run2!));
    await s.registry.register(worker('w2', 'i-2', run2!));
    await s.registry.register(worker('w3', 'i-1', run3!));
    const now = at();
    expect(
      await s.registry.setState({ instanceId: 'i-1', runId: run2!, workerId: 'w1' }, ['active'], {
        state: 'draining',
        drain: { kind: 'interruption', provider: 'aws', noticeAt: now, requestedAt: now },
      }),
    ).toBe(true);
    // Steals are counted by a node's coordinators, on PostgreSQL only.
    if (s.sql) await new PostgresRunStats(s.sql).addSteals(run2!, 4);
  }, 60_000);

  afterAll(async () => {
    await s?.close();
  });

  it('rollouts: in flight by their latest change, then the latest finished, each list capped', async () => {
    expect(await reads.rollouts({ live: 2, finished: 2 })).toEqual([a, e, d, c]);
    expect(await reads.rollouts({ live: 1, finished: 5 })).toEqual([a, d, c, b]);
    expect(await reads.rollouts({ live: 5, finished: 1 })).toEqual([a, e, d]);
  });

  it("transitions: each rollout's newest, newest first, without readings, metrics or labels", async () => {
    const history = async (rollout: string) => (await s.rollouts.events(rollout)).map(listed).reverse();
    const [ofA, ofD] = [await history(a!), await history(d!)];
    expect(ofA.length).toBeGreaterThan(1);
    // The store keeps labels on the record; the page's list leaves them out.
    expect((await s.rollouts.events(a!)).some((ev) => ev.detail.labels !== undefined)).toBe(true);
    const newest = await reads.transitions([a!, d!], 1);
    expect([...newest.keys()].sort()).toEqual([a, d].sort());
    expect(newest.get(a!)).toEqual(ofA.slice(0, 1));
    expect(newest.get(d!)).toEqual(ofD.slice(0, 1));
    expect((await reads.transitions([a!], 50)).get(a!)).toEqual(ofA);
    expect((await reads.transitions([], 5)).size).toBe(0);
  });

  it('runs: the newest first, with when, the coordinator epoch, steals and drains', async () => {
    const figures = await reads.runs(2);
    expect(figures.map((r) => r.id)).toEqual([run3, run2]);
    const [three, two] = figures;
    const record = await s.ledger.getRun(run2!);
    expect(two).toEqual({
      id: run2,
      createdAt: record!.createdAt,
      coordinatorEpoch: record!.coordinatorEpoch,
      steals: name === 'dynamodb' ? null : 4,
      drains: 1,
    });
    expect(three).toMatchObject({ id: run3, drains: 0, steals: name === 'dynamodb' ? null : 0 });
    expect((await reads.runs(5)).map((r) => r.id)).toEqual([run3, run2, run1]);
  });

  it("failures: each run's newest failed items first, reasons cut, runs without failures absent", async () => {
    const failures = await reads.failures([run1!, run2!], { limit: 5, reasonChars: 20 });
    expect([...failures.keys()]).toEqual([run2]);
    const [newest, older] = failures.get(run2!)!;
    expect(failures.get(run2!)).toHaveLength(2);
    expect(newest).toMatchObject({ id: failedShort, error: 'boom', attempts: 1, worker: 'w1' });
    expect(older).toMatchObject({ id: failedLong, error: `long ${'x'.repeat(15)}`, attempts: 1, worker: 'w1' });
    expect(newest!.at - older!.at).toBe(1_000);
    expect((await reads.failures([run2!], { limit: 1, reasonChars: 500 })).get(run2!)!.map((f) => f.id)).toEqual([failedShort]);
    expect((await reads.failures([], { limit: 5, reasonChars: 500 })).size).toBe(0);
  });

  it('unaddressable: the rollouts and runs named "." or "..", rollouts first', async () => {
    expect(await reads.unaddressable()).toEqual([]);
    // Written by the stores as a release before the id rule would have.
    await s.rollouts.create('..', SPEC, at(), 'old');
    await s.ledger.createRun('.', {}, at());
    expect(await reads.unaddressable()).toEqual([
      { kind: 'rollout', id: '..' },
      { kind: 'run', id: '.' },
    ]);
  });
});
