/**
 * The ledger contract, one suite for every backend: content-addressed
 * enqueue, each transition as a compare-and-swap over its exact prior state,
 * coordinator writes fenced by the run's coordinator lease.
 */
import { describe, expect, it } from 'vitest';
import { LeaseElector } from '../../shared/lease/elector.js';
import { FencedError } from '../../shared/lease/fencing.js';
import { contentId } from '../../shared/ledger/model.js';
import { coordinatorLease } from '../../shared/ledger/store.js';
import { ack, claim, fail, heartbeat, nack, reject, repend, start, steal, type ItemCas } from '../../shared/ledger/transitions.js';
import { forEachBackend, type LeaseBackend, postgresSchema, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { HEARTBEAT } from '../../shared/adapters/postgres/ledger-statements.js';
import { PostgresLedgerStore } from '../../shared/adapters/postgres/ledger-store.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

forEachBackend('ledger on %s', (backend) => {
  const clock = new ManualClock();

  async function run(items: unknown[]) {
    const runId = uniqueName('run');
    await backend.ledger.createRun(runId, { kind: 'test' }, clock.now());
    const { ids } = await backend.ledger.enqueue(runId, items, clock.now());
    return { runId, ids };
  }
  async function coordinator(runId: string, holderId: string) {
    const elector = new LeaseElector(backend.runLeases(runId), { name: coordinatorLease(runId), holderId, clock, ...LEASE });
    expect((await elector.campaign()).leader).toBe(true);
    return elector;
  }
  const cas = (c: Parameters<LeaseBackend['ledger']['cas']>[0]) => backend.ledger.cas(c, clock.now());

  it('enqueue is content-addressed and idempotent', async () => {
    const { runId, ids } = await run([{ prompt: 'a', n: 1 }, { n: 1, prompt: 'a' }, { prompt: 'b' }]);
    expect(ids[0]).toBe(ids[1]);
    expect(ids[0]).toBe(contentId({ n: 1, prompt: 'a' }));
    expect(await backend.ledger.counts(runId)).toEqual({ pending: 2, running: 0, done: 0, failed: 0 });
    expect((await backend.ledger.enqueue(runId, [{ prompt: 'b' }], clock.now())).added).toBe(0);
    expect(await backend.ledger.createRun(runId, {}, clock.now())).toEqual({ created: false });
  });

  it('isDone: not while an item is pending or running; once all are done or failed; an unknown run is done', async () => {
    const { runId, ids } = await run([{ done: 1 }, { done: 2 }]);
    expect(await backend.ledger.isDone(runId)).toBe(false);
    for (const id of ids) expect((await cas(claim(runId, id, 'w1', 0, clock.now()))).ok).toBe(true);
    expect(await backend.ledger.isDone(runId)).toBe(false);
    expect((await cas(ack(runId, ids[0]!, 'w1', { out: 1 }))).ok).toBe(true);
    expect(await backend.ledger.isDone(runId)).toBe(false);
    expect((await cas(ack(runId, ids[1]!, 'w1', { out: 2 }))).ok).toBe(true);
    expect(await backend.ledger.isDone(runId)).toBe(true);
    // More items: not done again.
    await backend.ledger.enqueue(runId, [{ done: 3 }], clock.now());
    expect(await backend.ledger.isDone(runId)).toBe(false);
    expect(await backend.ledger.isDone(uniqueName('never-created'))).toBe(true);
  });

  it('claim → start → heartbeat → ack; a retried submission records nothing twice', async () => {
    const { runId, ids } = await run([{ job: 1 }]);
    const id = ids[0]!;
    expect((await cas(claim(runId, id, 'w1', 0, clock.now()))).ok).toBe(true);
    expect((await cas(claim(runId, id, 'w2', 0, clock.now()))).ok).toBe(false); // already claimed
    expect((await cas(start(runId, id, 'w1', clock.now()))).ok).toBe(true);
    clock.advance(1_000);
    expect((await cas(heartbeat(runId, id, 'w1', clock.now()))).ok).toBe(true);
    expect((await cas(ack(runId, id, 'w2', { out: 'x' }))).ok).toBe(false); // not the holder
    const done = await cas(ack(runId, id, 'w1', { out: 'x' }));
    expect(done.ok && done.item).toMatchObject({ state: 'done', worker: 'w1', result: { out: 'x' }, resultHash: contentId({ out: 'x' }), heartbeatAt: null });
    const again = await cas(ack(runId, id, 'w1', { out: 'x' }));
    expect(again).toMatchObject({ ok: false, current: { state: 'done', resultHash: contentId({ out: 'x' }) } });
    expect((await backend.ledger.get(runId, id))!.version).toBe(4);
  });

  it('nack returns an item to Pending with no message on record; only a failure counts an attempt; fail records the reason, and counts an attempt only when told', async () => {
    const { runId, ids } = await run([{ job: 'n' }]);
    const id = ids[0]!;
    await cas(claim(runId, id, 'w1', 0, clock.now()));
    await cas(nack(runId, id, 'w1', 'drained', { counts: false }));
    expect(await backend.ledger.get(runId, id)).toMatchObject({ state: 'pending', worker: null, attempts: 0, error: 'drained', sentAt: null });
    await cas(claim(runId, id, 'w1', 0, clock.now()));
    await cas(nack(runId, id, 'w1', 'backend: boom', { counts: true }));
    expect(await backend.ledger.get(runId, id)).toMatchObject({ state: 'pending', attempts: 1, error: 'backend: boom' });
    const c = await coordinator(runId, 'c1');
    // What was already tried is failed as tried: no attempt ended here.
    await cas(fail(c.token()!, runId, id, { state: 'pending' }, 'poison: tried 1 times', { counts: false }));
    expect(await backend.ledger.get(runId, id)).toMatchObject({ state: 'failed', attempts: 1, error: 'poison: tried 1 times' });
    // A started item whose worker went silent: that attempt ended here, and counts.
    const silent = await run([{ job: 'silent' }]);
    const s = silent.ids[0]!;
    await cas(claim(silent.runId, s, 'w2', 0, clock.now()));
    await cas(start(silent.runId, s, 'w2', clock.now()));
    const cs = await coordinator(silent.runId, 'c2');
    await cas(fail(cs.token()!, silent.runId, s, { state: 'running', worker: 'w2' }, 'poison: started 1 times', { counts: true }));
    expect(await backend.ledger.get(silent.runId, s)).toMatchObject({ state: 'failed', attempts: 1, error: 'poison: started 1 times' });
  });

  it('reject: the holder fails an item whose result cannot be stored, once; nobody else can', async () => {
    const { runId, ids } = await run([{ job: 'r' }]);
    const id = ids[0]!;
    await cas(claim(runId, id, 'w1', 0, clock.now()));
    expect((await cas(reject(runId, id, 'w2', 'too big'))).ok).toBe(false);
    expect((await cas(reject(runId, id, 'w1', 'result of 300000 bytes exceeds the limit'))).ok).toBe(true);
    expect(await backend.ledger.get(runId, id)).toMatchObject({
      state: 'failed',
      worker: 'w1',
      error: 'result of 300000 bytes exceeds the limit',
      result: null,
    });
    expect((await cas(ack(runId, id, 'w1', 'late'))).ok).toBe(false);
  });

  it('unsent / markSent: an item is unsent until its message is recorded at the version sent; a claim in between is left alone', async () => {
    const { runId, ids } = await run([{ u: 1 }, { u: 2 }, { u: 3 }]);
    const [a, b, c] = ids as [string, string, string];
    const unsent = async (before = clock.now() - 60_000) => (await backend.ledger.unsent(runId, before, 10)).map((i) => i.id).sort();
    await expect.poll(() => unsent(), { interval: 20, timeout: 5_000 }).toEqual([a, b, c].sort());
    // b is claimed before its sender records the send: the record must not touch the running row.
    await cas(claim(runId, b, 'w1', 0, clock.now()));
    await backend.ledger.markSent(
      runId,
      [a, b, c].map((id) => ({ id, version: 0 })),
      clock.now(),
    );
    expect(await backend.ledger.get(runId, a)).toMatchObject({ state: 'pending', sentAt: clock.now(), version: 0 });
    expect(await backend.ledger.get(runId, b)).toMatchObject({ state: 'running', worker: 'w1' });
    await expect.poll(() => unsent(), { interval: 20, timeout: 5_000 }).toEqual([]);
    // A message older than the queue keeps them counts as gone.
    await expect.poll(() => unsent(clock.now() + 1), { interval: 20, timeout: 5_000 }).toEqual([a, c].sort());
    // Back to Pending: no message on record again.
    await cas(nack(runId, b, 'w1', 'backend: no', { counts: true }));
    await expect.poll(() => unsent(), { interval: 20, timeout: 5_000 }).toEqual([b]);
  });

  it('markUnsent (a failover’s step): every Pending item sent before has no message on record again, a page at a time; a Running one is left alone', async () => {
    const { runId, ids } = await run([{ f: 1 }, { f: 2 }, { f: 3 }]);
    const [a, b, c] = ids as [string, string, string];
    await backend.ledger.markSent(
      runId,
      ids.map((id) => ({ id, version: 0 })),
      clock.now(),
    );
    await cas(claim(runId, c, 'w1', 0, clock.now()));
    const unsent = async () => (await backend.ledger.unsent(runId, clock.now() - 60_000, 10)).map((i) => i.id).sort();
    await expect.poll(() => unsent(), { interval: 20, timeout: 5_000 }).toEqual([]);
    // Pages until none is left (the index may show a marked one a moment longer: marking it again is harmless).
    let marked = 0;
    for (let n = await backend.ledger.markUnsent(runId, 1); n > 0 && marked < 10; n = await backend.ledger.markUnsent(runId, 1)) marked += n;
    expect(marked).toBeGreaterThanOrEqual(2);
    await expect.poll(() => unsent(), { interval: 20, timeout: 5_000 }).toEqual([a, b].sort());
    expect(await backend.ledger.get(runId, a)).toMatchObject({ state: 'pending', sentAt: null, version: 0 });
    expect(await backend.ledger.get(runId, c)).toMatchObject({ state: 'running', worker: 'w1' });
  });

  it('concurrent start and steal of an unstarted item: exactly one wins, and one result is recorded', async () => {
    for (let round = 0; round < 50; round++) {
      const { runId, ids } = await run([{ race: round }]);
      const id = ids[0]!;
      const coord = await coordinator(runId, 'c1');
      await cas(claim(runId, id, 'victim', 0, clock.now()));
      const [started, stolen] = await Promise.all([
        cas(start(runId, id, 'victim', clock.now())),
        cas(steal(coord.token()!, runId, id, 'victim', 'thief', clock.now())),
      ]);
      expect(Number(started.ok) + Number(stolen.ok), `round ${round}`).toBe(1);
      const [victimAck, thiefAck] = await Promise.all([cas(ack(runId, id, 'victim', { by: 'victim' })), cas(ack(runId, id, 'thief', { by: 'thief' }))]);
      expect(Number(victimAck.ok) + Number(thiefAck.ok)).toBe(1);
      expect((await backend.ledger.get(runId, id))!.worker).toBe(started.ok ? 'victim' : 'thief');
    }
  });

  it('a started item is never stolen; a steal moves Running(victim) to Running(thief) with no Pending window', async () => {
    const { runId, ids } = await run([{ s: 1 }, { s: 2 }]);
    const coord = await coordinator(runId, 'c1');
    for (const id of ids) await cas(claim(runId, id, 'victim', 0, clock.now()));
    await cas(start(runId, ids[0]!, 'victim', clock.now()));
    expect((await cas(steal(coord.token()!, runId, ids[0]!, 'victim', 'thief', clock.now()))).ok).toBe(false);
    const moved = await cas(steal(coord.token()!, runId, ids[1]!, 'victim', 'thief', clock.now()));
    expect(moved.ok && moved.item).toMatchObject({ state: 'running', worker: 'thief', started: false, epoch: coord.token()!.epoch });
    expect((await cas(start(runId, ids[1]!, 'victim', clock.now()))).ok).toBe(false); // the victim's late start loses
  });

  it('repend is pinned to the version judged stale: a heartbeat in between keeps the item; a started item counts an attempt, an unstarted one not', async () => {
    const { runId, ids } = await run([{ started: 1 }, { waiting: 1 }]);
    const coord = await coordinator(runId, 'c1');
    const [ran, waited] = ids as [string, string];
    await cas(claim(runId, ran, 'w-dead', 0, clock.now()));
    await cas(start(runId, ran, 'w-dead', clock.now()));
    await cas(claim(runId, waited, 'w-dead', 0, clock.now()));
    const judged = (await backend.ledger.get(runId, ran))!;
    // A heartbeat that lands after the scan read the row defeats the re-pend, even with the same stamp.
    await cas(heartbeat(runId, ran, 'w-dead', judged.heartbeatAt!));
    expect((await cas(repend(coord.token()!, runId, judged, 'silent'))).ok).toBe(false);
    const fresh = (await backend.ledger.get(runId, ran))!;
    expect((await cas(repend(coord.token()!, runId, fresh, 'silent'))).ok).toBe(true);
    expect((await cas(repend(coord.token()!, runId, (await backend.ledger.get(runId, waited))!, 'silent'))).ok).toBe(true);
    expect(await backend.ledger.get(runId, ran)).toMatchObject({ state: 'pending', attempts: 1, error: 'silent', sentAt: null });
    expect(await backend.ledger.get(runId, waited)).toMatchObject({ state: 'pending', attempts: 0 });
  });

  it('coordinator writes are fenced; every lease win stamps the run’s epoch', async () => {
    const { runId, ids } = await run([{ f: 1 }]);
    const id = ids[0]!;
    const old = await coordinator(runId, 'c-old');
    expect((await backend.ledger.getRun(runId))!.coordinatorEpoch).toBe(0);
    await cas(claim(runId, id, 'victim', 0, clock.now()));
    const staleToken = old.token()!;
    clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
    const fresh = await coordinator(runId, 'c-new');
    expect(fresh.token()!.epoch).toBe(1);
    expect((await backend.ledger.getRun(runId))!.coordinatorEpoch).toBe(1);
    await expect(cas(steal(staleToken, runId, id, 'victim', 'thief', clock.now()))).rejects.toBeInstanceOf(FencedError);
    const item = (await backend.ledger.get(runId, id))!;
    await expect(cas(repend(staleToken, runId, item, 'silent'))).rejects.toBeInstanceOf(FencedError);
    expect((await cas(steal(fresh.token()!, runId, id, 'victim', 'thief', clock.now()))).ok).toBe(true);
    await fresh.campaign(); // a renewal keeps the stamp
    expect((await backend.ledger.getRun(runId))!.coordinatorEpoch).toBe(1);
  });

  it('casMany judges each change on its own exact prior state, keeps input order, and fences a coordinator batch', async () => {
    const { runId, ids } = await run([{ m: 1 }, { m: 2 }, { m: 3 }, { m: 4 }]);
    const [a, b, c, d] = ids as [string, string, string, string];
    expect((await cas(claim(runId, c, 'other', 0, clock.now()))).ok).toBe(true);
    const claims = await backend.ledger.casMany(
      [a, b, c, d].map((id) => claim(runId, id, 'w1', 0, clock.now())),
      clock.now(),
    );
    expect(claims.map((o) => o.ok)).toEqual([true, true, false, true]);
    const lostOne = claims[2]!;
    expect(!lostOne.ok && lostOne.current).toMatchObject({ id: c, state: 'running', worker: 'other' });
    // Mixed shapes in one call: starts and an ack of an unstarted item, results stay in order.
    const mixed = await backend.ledger.casMany(
      [start(runId, a, 'w1', clock.now()), ack(runId, b, 'w1', { r: 'b' }), start(runId, c, 'w1', clock.now()), start(runId, d, 'w1', clock.now())],
      clock.now(),
    );
    expect(mixed.map((o) => o.ok)).toEqual([true, true, false, true]);
    const acks = await backend.ledger.casMany(
      [ack(runId, a, 'w1', { r: 'a' }), ack(runId, b, 'w1', { r: 'again' }), ack(runId, d, 'w1', { r: 'd' })],
      clock.now(),
    );
    expect(acks.map((o) => o.ok)).toEqual([true, false, true]); // b already has its one result
    expect((await backend.ledger.get(runId, b))!.result).toEqual({ r: 'b' });
    expect((await backend.ledger.get(runId, a))!).toMatchObject({ state: 'done', result: { r: 'a' }, resultHash: contentId({ r: 'a' }) });
    // A deposed coordinator's batch is refused as a whole.
    const old = await coordinator(runId, 'c1');
    const token = old.token()!;
    clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
    await coordinator(runId, 'c2');
    await expect(backend.ledger.casMany([steal(token, runId, c, 'other', 'w1', clock.now())], clock.now())).rejects.toBeInstanceOf(FencedError);
    expect((await backend.ledger.get(runId, c))!.worker).toBe('other');
    expect(await backend.ledger.casMany([], clock.now())).toEqual([]);
    // applyMany: the same judgement, answered as booleans in input order; one change per item per call.
    const more = await run([{ m: 5 }, { m: 6 }, { m: 7 }]);
    const [e, f, g] = more.ids as [string, string, string];
    await backend.ledger.applyMany(
      [e, f, g].map((id) => claim(more.runId, id, 'w2', 0, clock.now())),
      clock.now(),
    );
    expect(
      await backend.ledger.applyMany(
        [heartbeat(more.runId, e, 'w2', clock.now()), heartbeat(more.runId, f, 'w3', clock.now()), nack(more.runId, g, 'w2', 'give back', { counts: true })],
        clock.now(),
      ),
    ).toEqual([true, false, true]);
    expect((await backend.ledger.get(more.runId, g))!).toMatchObject({ state: 'pending', attempts: 1, error: 'give back' });
    await expect(backend.ledger.applyMany([heartbeat(more.runId, e, 'w2', clock.now()), ack(more.runId, e, 'w2', 1)], clock.now())).rejects.toThrow(
      /more than one change for item/,
    );
  });

  it('each transition writes exactly its change: the fields it sets, an attempt when it counts one, the next version', async () => {
    const { runId, ids } = await run(Array.from({ length: 8 }, (_, i) => ({ exact: i })));
    const [a1, a2, b1, b2, c1, c2, d1, d2] = ids as [string, string, string, string, string, string, string, string];
    const token = (await coordinator(runId, 'c1')).token()!;
    const read = async (id: string) => (await backend.ledger.get(runId, id))!;
    // One batch, two items per transition; each outcome is the prior row with the change applied as plain data.
    const step = async (changes: ItemCas[]) => {
      const before = await Promise.all(changes.map((c) => read(c.itemId)));
      const outs = await backend.ledger.casMany(changes, clock.now());
      outs.forEach((out, i) => {
        const [c, prior] = [changes[i]!, before[i]!];
        expect(out, `${c.transition} of ${c.itemId}`).toEqual({
          ok: true,
          item: { ...prior, ...c.set, attempts: prior.attempts + (c.bumpAttempts ? 1 : 0), version: prior.version + 1 },
        });
      });
      clock.advance(1_000);
    };
    await step(ids.map((id) => claim(runId, id, 'w1', token.epoch, clock.now())));
    await step([
      ...[a1, a2].map((id) => start(runId, id, 'w1', clock.now())),
      nack(runId, b1, 'w1', 'backend: boom', { counts: true }),
      nack(runId, b2, 'w1', 'drained', { counts: false }),
      ...[c1, c2].map((id) => reject(runId, id, 'w1', 'too big')),
      ...[d1, d2].map((id) => steal(token, runId, id, 'w1', 'w2', clock.now())),
    ]);
    await step([
      ...[a1, a2].map((id) => heartbeat(runId, id, 'w1', clock.now())),
      fail(token, runId, b1, { state: 'pending' }, 'poison', { counts: false }),
      fail(token, runId, b2, { state: 'pending', version: (await read(b2)).version }, 'poison', { counts: false }),
      start(runId, d1, 'w2', clock.now()),
    ]);
    await step([
      ack(runId, a1, 'w1', { out: 1 }),
      ack(runId, a2, 'w1', null),
      ...(await Promise.all([d1, d2].map(read))).map((item) => repend(token, runId, item, 'silent')),
    ]);
    await step([d1, d2].map((id) => claim(runId, id, 'w3', token.epoch, clock.now())));
    await step([
      fail(token, runId, d1, { state: 'running', worker: 'w3', version: (await read(d1)).version }, 'poison', { counts: true }),
      fail(token, runId, d2, { state: 'running', worker: 'w3' }, 'poison', { counts: true }),
    ]);
    expect(await backend.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 2, failed: 6 });
  });

  it('openRuns lists the runs with anything pending or running, not finished or empty ones', async () => {
    const pending = await run([{ o: 1 }]);
    const running = await run([{ o: 2 }]);
    const finished = await run([{ o: 3 }]);
    const empty = await run([]);
    expect((await cas(claim(running.runId, running.ids[0]!, 'w', 0, clock.now()))).ok).toBe(true);
    expect((await cas(claim(finished.runId, finished.ids[0]!, 'w', 0, clock.now()))).ok).toBe(true);
    expect((await cas(ack(finished.runId, finished.ids[0]!, 'w', 'r'))).ok).toBe(true);
    // DynamoDB's index is eventually consistent: wait for the settled answer.
    await expect
      .poll(
        async () => {
          const open = new Set(await backend.ledger.openRuns());
          return [pending.runId, running.runId, finished.runId, empty.runId].map((id) => open.has(id));
        },
        { interval: 20, timeout: 5_000 },
      )
      .toEqual([true, true, false, false]);
  });

  it('a finished run that gets new items is open again', async () => {
    const r = await run([{ reopen: 1 }]);
    expect((await cas(claim(r.runId, r.ids[0]!, 'w', 0, clock.now()))).ok).toBe(true);
    expect((await cas(ack(r.runId, r.ids[0]!, 'w', 'r'))).ok).toBe(true);
    await expect.poll(async () => (await backend.ledger.openRuns()).includes(r.runId), { interval: 20, timeout: 5_000 }).toBe(false);
    // Listed again after it was found finished (DynamoDB takes it out of its index then).
    expect(await backend.ledger.openRuns()).not.toContain(r.runId);
    const { added } = await backend.ledger.enqueue(r.runId, [{ reopen: 2 }], clock.now());
    expect(added).toBe(1);
    await expect.poll(async () => (await backend.ledger.openRuns()).includes(r.runId), { interval: 20, timeout: 5_000 }).toBe(true);
  });

  it('running / pending queries return only their set', async () => {
    const { runId, ids } = await run(Array.from({ length: 6 }, (_, i) => ({ q: i })));
    for (const [i, id] of ids.slice(0, 3).entries()) {
      await cas(claim(runId, id, `w${i}`, 0, clock.now()));
      clock.advance(1_000);
    }
    await cas(ack(runId, ids[0]!, 'w0', 'ok'));
    // Index reads may lag on DynamoDB (eventually consistent GSI): wait for the settled view.
    await expect.poll(async () => (await backend.ledger.running(runId)).map((i) => i.worker).sort(), { interval: 20, timeout: 5_000 }).toEqual(['w1', 'w2']);
    await expect.poll(async () => (await backend.ledger.pending(runId, 10)).length, { interval: 20, timeout: 5_000 }).toBe(3);
    const firstPage = await backend.ledger.pending(runId, 2);
    const secondPage = await backend.ledger.pending(runId, 2, firstPage.at(-1));
    expect(new Set([...firstPage, ...secondPage].map((i) => i.id)).size).toBe(3);
    expect(await backend.ledger.counts(runId)).toEqual({ pending: 3, running: 2, done: 1, failed: 0 });
  });
});

describe('ledger indexes on PostgreSQL', () => {
  it('the running and unsent queries read their partial indexes, not the run', async () => {
    const db = await postgresSchema(2);
    try {
      const ledger = new PostgresLedgerStore(db.sql);
      await ledger.createRun('big', {}, Date.now());
      await ledger.enqueue(
        'big',
        Array.from({ length: 5_000 }, (_, i) => ({ i })),
        Date.now(),
      );
      await db.sql.query(`UPDATE work_items SET state = 'done' WHERE run_id = 'big'`);
      await db.sql.query(
        `UPDATE work_items SET state = 'running', worker = 'w', heartbeat_at = now() WHERE run_id = 'big' AND id IN (SELECT id FROM work_items WHERE run_id = 'big' LIMIT 20)`,
      );
      await db.sql.query('ANALYZE work_items');
      const plan = async (q: string) => JSON.stringify((await db.sql.query(`EXPLAIN (FORMAT JSON) ${q}`)).rows);
      expect(
        await plan(
          `SELECT * FROM work_items WHERE run_id = 'big' AND state = 'pending' AND (sent_at IS NULL OR sent_at < now()) ORDER BY sent_at NULLS FIRST LIMIT 100`,
        ),
      ).toContain('work_items_unsent');
      expect(await plan(`SELECT * FROM work_items WHERE run_id = 'big' AND state = 'running' ORDER BY heartbeat_at`)).toContain('work_items_running');
    } finally {
      await db.close();
    }
  });

  it('a batched transition looks its items up by key, though the statistics were taken while all were Pending', async () => {
    const db = await postgresSchema(2);
    try {
      const ledger = new PostgresLedgerStore(db.sql);
      await ledger.createRun('busy', {}, Date.now());
      const { ids } = await ledger.enqueue(
        'busy',
        Array.from({ length: 20_000 }, (_, i) => ({ i })),
        Date.now(),
      ); // analyzed: all Pending
      await db.sql.query(`UPDATE work_items SET state = 'running', worker = 'w', heartbeat_at = now() WHERE run_id = 'busy'`);
      const batch = ids.slice(0, 100);
      const plan = async (text: string) =>
        JSON.stringify(
          (await db.sql.query(`EXPLAIN (FORMAT JSON) ${text}`, ['busy', new Date(), batch, batch.map(() => 'w'), batch.map(() => new Date())])).rows,
        );
      const heartbeats = HEARTBEAT.text as string;
      expect(await plan(heartbeats)).toContain('work_items_pkey');
      // What the statement's text avoids: with a plain constant the batch would read the whole running set.
      expect(await plan(heartbeats.replace("(SELECT 'running')", "'running'"))).toContain('work_items_running');
    } finally {
      await db.close();
    }
  });
});
