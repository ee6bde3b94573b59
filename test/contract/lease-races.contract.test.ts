/**
 * Eight contenders campaign concurrently for 500 rounds on every backend.
 * Rounds cycle through the three kinds of race — renewal (the lease is
 * valid), steal (it has expired) and take-over of a released row — with real
 * concurrent requests to the store.
 */
import { expect, it } from 'vitest';
import { LeaseElector } from '../../shared/lease/elector.js';
import { forEachBackend, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

function shuffle<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const CONTENDERS = 8;
const ROUNDS = 500;
const TIMINGS = { ttlMs: 3_000, renewIntervalMs: 1_000, retryIntervalMs: 500, clockSkewMs: 100 };

forEachBackend('lease races on %s', (backend) => {
  it(`${CONTENDERS} contenders × ${ROUNDS} rounds: one holder per epoch, epochs increase, views match the row`, { timeout: 240_000 }, async () => {
    const name = uniqueName('race');
    const clock = new ManualClock();
    const electors = Array.from({ length: CONTENDERS }, (_, i) => new LeaseElector(backend.store, { name, holderId: `c${i}`, clock, ...TIMINGS }));
    const holderOfEpoch = new Map<number, string>();
    let highestEpoch = -1;
    const kinds = { renew: 0, steal: 0, release: 0 };

    for (let round = 0; round < ROUNDS; round++) {
      const kind = round % 3 === 0 ? 'steal' : round % 3 === 1 ? 'renew' : 'release';
      kinds[kind]++;
      if (kind === 'steal') clock.advance(TIMINGS.ttlMs + TIMINGS.clockSkewMs);
      if (kind === 'renew') clock.advance(TIMINGS.renewIntervalMs);
      if (kind === 'release') {
        const current = electors.find((e) => e.token() !== null);
        await current?.resign();
      }

      // Shuffled start order: on a serialising engine (PGlite) the first caller would always win.
      const order = shuffle(electors);
      const results = await Promise.all(order.map((e) => e.campaign()));
      const leaders = order.filter((_, i) => results[i]!.leader);
      expect(leaders.length, `round ${round}: exactly one leader`).toBe(1);

      const row = await backend.store.read(name);
      for (const e of leaders) {
        const token = e.token()!;
        // Every holder's view is the row's.
        expect(token, `round ${round}`).toEqual({ name, holder: row!.holder, epoch: row!.epoch });
        const prior = holderOfEpoch.get(token.epoch);
        expect(prior ?? token.holder, `epoch ${token.epoch} had two holders`).toBe(token.holder);
        if (prior === undefined) {
          expect(token.epoch, `round ${round}: epochs only increase`).toBeGreaterThan(highestEpoch);
          holderOfEpoch.set(token.epoch, token.holder);
          highestEpoch = token.epoch;
        } else {
          expect(token.epoch).toBe(highestEpoch);
        }
      }
    }
    // Every release hands over a new epoch; an expired lease goes to a stealer (epoch + 1)
    // or back to its holder (same epoch); renewals never change it.
    expect(highestEpoch).toBeGreaterThanOrEqual(kinds.release);
    expect(highestEpoch).toBeLessThanOrEqual(kinds.steal + kinds.release);
    expect(new Set(holderOfEpoch.values()).size).toBeGreaterThan(1);
  });
});
