/**
 * Retention: a test clock runs past every lifetime, on every backend, and
 * each family is pruned, except what docs/operating/retention.md#what-is-kept lists as kept.
 */
import { beforeEach, expect, it } from 'vitest';
import { InProcessBus, type EventBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { createRollout } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { BatchPromoter } from '../../shared/rollout/promoters.js';
import { DAY_MS } from '../../shared/retention.js';
import { ack, claim, reject } from '../../shared/ledger/transitions.js';
import { runKeys } from '../../shared/adapters/dynamodb/ledger-keys.js';
import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
/** `waits`: a stage that waits for traffic no one reports, so it runs as long as the test does. */
const spec = (alarms: string[], waits = false) => ({
  target: { service: 'checkout', version: 'v2' },
  stages: [{ name: 'all', percent: 100, bakeSeconds: 0, gates: { alarms, minRequests: waits ? 100 : 0 } }],
});

forEachBackend('retention on %s', { fresh: 'each' }, (backend) => {
  let clock: ManualClock;
  beforeEach(() => {
    clock = new ManualClock();
  });

  function node(bus: EventBus = new InProcessBus()) {
    const elector = new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE });
    const engine = new RolloutEngine({ store: backend.rollouts, bus, clock });
    return { elector, engine, batch: new BatchPromoter(engine, campaignEachTime(elector)) };
  }
  const ids = async () => (await backend.rollouts.list({ limit: 100 })).rollouts.map((r) => r.id).sort();

  it('a rollout that ended goes, whole, once its 90 days have passed; what runs, is paused or is unpublished stays', async () => {
    let down = false;
    const bus = new InProcessBus();
    const a = node({ publish: (events) => (down ? Promise.reject(new Error('bus down')) : bus.publish(events)) });
    const ended = (await createRollout(a.engine, { spec: spec(['only-ended']), actor: 'alice' })).id;
    const sharing = (await createRollout(a.engine, { spec: spec(['shared']), actor: 'alice' })).id;
    const running = (await createRollout(a.engine, { spec: spec(['shared'], true), actor: 'alice' })).id;
    const paused = (await createRollout(a.engine, { spec: spec([], true), actor: 'alice' })).id;
    await backend.rollouts.recordAlarm('only-ended', 'OK', clock.now());
    await backend.rollouts.recordAlarm('shared', 'OK', clock.now());
    await backend.rollouts.recordMetrics(ended, { stage: 0 }, { requests: 10, errors: 0, p99LatencyMs: null, observedAt: clock.now() });
    await a.batch.tick();
    await a.batch.tick();
    expect((await backend.rollouts.load(ended))?.rollout.state).toBe('completed');
    expect((await backend.rollouts.load(sharing))?.rollout.state).toBe('completed');
    await a.elector.campaign();
    await a.engine.command(paused, () => ({ kind: 'pause', reason: 'by hand' }), a.elector.token()!, 'alice');
    // One that ends while the bus is down: its events stay in the outbox, and it stays with them.
    down = true;
    const unpublished = (await createRollout(a.engine, { spec: spec([]), actor: 'alice' })).id;
    await a.batch.tick();
    expect((await backend.rollouts.load(unpublished))?.rollout.state).toBe('completed');
    const all = [ended, sharing, running, paused, unpublished].sort();
    expect(await ids()).toEqual(all);

    // A minute short of 90 days after they ended: nothing goes.
    clock.advance(90 * DAY_MS - 60_000);
    expect((await a.batch.tick()).ended).toBe(0);
    expect(await ids()).toEqual(all);
    clock.advance(120_000);
    expect((await a.batch.tick()).ended).toBe(2);
    expect(await ids()).toEqual([running, paused, unpublished].sort());
    for (const id of [ended, sharing]) {
      expect(await backend.rollouts.load(id)).toBeNull();
      expect(await backend.rollouts.events(id)).toEqual([]);
      expect(await backend.rollouts.actuations(id)).toEqual([]);
      expect(await backend.rollouts.gateReadings(id)).toEqual([]);
    }
    // The state of the alarm only the pruned rollout watched is gone; the one a kept rollout watches stays.
    const watcher = (await createRollout(a.engine, { spec: spec(['only-ended', 'shared'], true), actor: 'alice' })).id;
    expect((await backend.rollouts.load(watcher))?.alarms).toEqual({ shared: 'OK' });
    expect((await backend.rollouts.loadWatching('shared')).map((v) => v.rollout.id).sort()).toEqual([running, watcher].sort());

    // Published at last: the third goes on the next tick; a tick with nothing past its lifetime deletes nothing.
    down = false;
    await expect
      .poll(
        async () => {
          await a.batch.tick();
          return (await backend.rollouts.unpublishedEvents(10)).length;
        },
        { interval: 20, timeout: 10_000 },
      )
      .toBe(0);
    await expect
      .poll(
        async () => {
          await a.batch.tick();
          return (await ids()).includes(unpublished);
        },
        { interval: 20, timeout: 10_000 },
      )
      .toBe(false);
    expect(await ids()).toEqual([running, paused, watcher].sort());
    expect((await a.batch.tick()).ended).toBe(0);
  });

  it('a rollout retried after it ended is not pruned on its first ending', async () => {
    const a = node();
    const { id } = await createRollout(a.engine, { spec: spec([]), actor: 'alice' });
    await a.elector.campaign();
    await a.engine.command(id, () => ({ kind: 'abort', reason: 'by hand' }), a.elector.token()!, 'alice');
    clock.advance(30 * DAY_MS);
    await a.elector.campaign();
    await a.engine.command(id, () => ({ kind: 'retry' }), a.elector.token()!, 'alice');
    clock.advance(61 * DAY_MS);
    await a.batch.tick();
    expect((await backend.rollouts.load(id))?.rollout.state).toBe('completed');
    // Ended again just now (completed on that tick): its 90 days start there.
    clock.advance(89 * DAY_MS);
    expect((await a.batch.tick()).ended).toBe(0);
    clock.advance(DAY_MS + 1);
    expect((await a.batch.tick()).ended).toBe(1);
    expect(await backend.rollouts.load(id)).toBeNull();
  });

  it('a finished run goes once its 30 days have passed (on DynamoDB its record, its items by the TTL their last write set); an open or re-opened run stays', async () => {
    const ledger = backend.ledger;
    const t0 = Date.now();
    const make = async (id: string, n: number) => {
      await ledger.createRun(id, {}, t0, { shards: 2 });
      return (
        await ledger.enqueue(
          id,
          Array.from({ length: n }, (_, i) => ({ id, i })),
          t0,
        )
      ).ids;
    };
    const finish = async (runId: string, ids: readonly string[], at: number) => {
      for (const [i, id] of ids.entries()) {
        expect((await ledger.cas(claim(runId, id, 'w', 0, at), at)).ok).toBe(true);
        expect((await ledger.cas(i % 2 ? ack(runId, id, 'w', { i }) : reject(runId, id, 'w', 'too big'), at)).ok).toBe(true);
      }
    };
    const finished = await make('r-finished', 6);
    await finish('r-finished', finished, t0);
    await make('r-open', 2);
    const reopened = await make('r-reopened', 2);
    await finish('r-reopened', reopened, t0);
    // The coordinator's scan finds the finished ones (DynamoDB closes them there); a first pass notes them (PostgreSQL).
    expect(await ledger.openRuns()).toEqual(['r-open']);
    expect(await ledger.pruneRuns(t0 - 30 * DAY_MS, 1_000, t0)).toEqual({ runs: 0, items: 0 });
    // New work re-opens one.
    await ledger.enqueue('r-reopened', [{ again: true }], Date.now());
    // Past 30 days since they finished (closing is stamped on the store's own clock: count from now).
    const past = Date.now() + 60_000;
    let pruned = { runs: 0, items: 0 };
    for (let pass = 0; pass < 5; pass++) {
      const p = await ledger.pruneRuns(past, 4, past + 30 * DAY_MS);
      pruned = { runs: pruned.runs + p.runs, items: pruned.items + p.items };
    }
    expect(pruned.runs).toBe(1);
    expect(await ledger.getRun('r-finished')).toBeNull();
    expect((await ledger.listRuns({ limit: 10 })).runs.map((r) => r.id).sort()).toEqual(['r-open', 'r-reopened']);
    expect(await ledger.counts('r-open')).toMatchObject({ pending: 2 });
    expect(await ledger.counts('r-reopened')).toMatchObject({ pending: 1 });
    for (const id of reopened) expect(await ledger.get('r-reopened', id)).not.toBeNull();
    if (backend.name === 'dynamodb') {
      // Each finished item carries the TTL its last write set: 30 days after it finished, when DynamoDB deletes it.
      expect(pruned.items).toBe(0);
      const raw = backend.ledger as unknown as { doc: DynamoDBDocumentClient; table: string };
      for (const id of finished) {
        const key = runKeys('r-finished', 2).item(id);
        const { Item } = await raw.doc.send(new GetCommand({ TableName: raw.table, Key: key, ConsistentRead: true }));
        expect(Item?.ttl).toBe(Math.floor(t0 / 1000) + 30 * 86_400);
      }
    } else {
      expect(pruned.items).toBe(6);
      for (const id of finished) expect(await ledger.get('r-finished', id)).toBeNull();
    }
  });
});
