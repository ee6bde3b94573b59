/**
 * Rollouts listed newest first, a page at a time, on every backend: every
 * rollout once, in creation order, finished ones included; a state filter;
 * a cursor that is not one refused.
 */
import { expect, it } from 'vitest';
import { BadCursorError } from '../../shared/cursor.js';
import { newestRollouts } from '../../shared/api/metrics.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';
import type { RolloutState } from '../../shared/rollout/model.js';
import type { RolloutStore } from '../../shared/rollout/store.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { forEachBackend, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const SPEC = parseRolloutSpec({ target: { service: 'web', version: 'v2' }, stages: [{ name: 'all', percent: 100, bakeSeconds: 3600 }] });
const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

async function all(store: RolloutStore, o: { state?: RolloutState; limit: number }) {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 200; pages++) {
    const page = await store.list({ limit: o.limit, ...(o.state ? { state: o.state } : {}), ...(cursor ? { cursor } : {}) });
    expect(page.rollouts.length).toBeLessThanOrEqual(o.limit);
    ids.push(...page.rollouts.map((r) => r.id));
    if (!page.next) break;
    cursor = page.next;
  }
  return ids;
}

forEachBackend('rollouts listed on %s', { fresh: 'each' }, (backend) => {
  it('newest first, every rollout once across pages, finished ones included; a state filter; a bad cursor refused', async () => {
    const clock = new ManualClock();
    const engine = new RolloutEngine({ store: backend.rollouts, bus: new InProcessBus(), clock });
    const token = campaignEachTime(new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'lister', clock, ...LEASE }));
    const made: string[] = [];
    for (let n = 0; n < 7; n++) {
      made.push((await createRollout(engine, { spec: SPEC, actor: 'alice', id: uniqueName(`list${n}`) })).id);
      clock.advance(1_000);
    }
    for (const id of made.slice(0, 3)) await runCommand(engine, (await token())!, { rolloutId: id, command: 'abort', actor: 'alice' });
    const listed = await all(backend.rollouts, { limit: 3 });
    expect(listed.filter((id) => made.includes(id))).toEqual([...made].reverse());
    expect((await all(backend.rollouts, { state: 'aborted', limit: 2 })).filter((id) => made.includes(id))).toEqual(made.slice(0, 3).reverse());
    expect((await all(backend.rollouts, { state: 'running', limit: 100 })).filter((id) => made.includes(id))).toEqual(made.slice(3).reverse());
    await expect(backend.rollouts.list({ limit: 5, cursor: 'nope' })).rejects.toBeInstanceOf(BadCursorError);
    // What the figures show: the newest running ones up to a cap, loaded, and that more were left out.
    const newest = await newestRollouts(backend.rollouts, 'running', 2);
    expect(newest.views.map((v) => v.rollout.id)).toEqual(made.slice(-2).reverse());
    expect(newest.more).toBe(true);
    const every = await newestRollouts(backend.rollouts, 'running', 4);
    expect(every.views.map((v) => v.rollout.id)).toEqual(made.slice(3).reverse());
    expect(every.more).toBe(false);
    expect(await newestRollouts(backend.rollouts, 'paused', 0)).toEqual({ views: [], more: false });
  });
});
