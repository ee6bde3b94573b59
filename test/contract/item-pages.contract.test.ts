/**
 * A run's items read back page by page, on every backend (and a sharded run
 * on DynamoDB): every item exactly once, in a stable order, with its result
 * or its failure reason; a state filter; a cursor of another run refused.
 * And the runs themselves, listed newest first.
 */
import { expect, it } from 'vitest';
import { BadCursorError } from '../../shared/cursor.js';
import type { LedgerStore } from '../../shared/ledger/store.js';
import { ack, claim, reject, start } from '../../shared/ledger/transitions.js';
import { forEachBackend, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

async function all(ledger: LedgerStore, runId: string, o: { state?: 'done' | 'failed' | 'pending'; limit: number }) {
  const seen: { id: string; state: string; result: unknown; error: string | null }[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await ledger.items(runId, { limit: o.limit, ...(o.state ? { state: o.state } : {}), ...(cursor ? { cursor } : {}) });
    expect(page.items.length).toBeLessThanOrEqual(o.limit);
    seen.push(...page.items.map((i) => ({ id: i.id, state: i.state, result: i.result, error: i.error })));
    cursor = page.next ?? undefined;
    pages++;
  } while (cursor && pages < 100);
  return { seen, pages };
}

forEachBackend('run items, page by page, on %s', (backend, name) => {
  const clock = new ManualClock();

  for (const shards of name === 'dynamodb' ? [undefined, 4] : [undefined]) {
    it(`every item once, with its result or reason; a state filter; a foreign cursor refused${shards ? ` (${shards} shards)` : ''}`, async () => {
      const runId = uniqueName('pages');
      await backend.ledger.createRun(runId, {}, clock.now(), shards ? { shards } : {});
      const { ids } = await backend.ledger.enqueue(
        runId,
        Array.from({ length: 23 }, (_, n) => ({ n })),
        clock.now(),
      );
      // Items 0–9 done with a result, 10–12 failed with a reason, the rest pending.
      for (const [n, id] of ids.entries()) {
        if (n >= 13) break;
        expect((await backend.ledger.cas(claim(runId, id, 'w1', 0, clock.now()), clock.now())).ok).toBe(true);
        expect((await backend.ledger.cas(start(runId, id, 'w1', clock.now()), clock.now())).ok).toBe(true);
        const change = n < 10 ? ack(runId, id, 'w1', { square: n * n }) : reject(runId, id, 'w1', `item ${n}: backend answered 500`);
        expect((await backend.ledger.cas(change, clock.now())).ok).toBe(true);
      }
      const everything = await all(backend.ledger, runId, { limit: 5 });
      expect(everything.seen.map((i) => i.id).sort()).toEqual([...ids].sort());
      expect(everything.pages).toBeGreaterThanOrEqual(5);
      const byId = new Map(everything.seen.map((i) => [i.id, i]));
      ids.forEach((id, n) => {
        const item = byId.get(id)!;
        if (n < 10) expect(item).toMatchObject({ state: 'done', result: { square: n * n } });
        else if (n < 13) expect(item).toMatchObject({ state: 'failed', error: `item ${n}: backend answered 500` });
        else expect(item.state).toBe('pending');
      });
      const done = await all(backend.ledger, runId, { state: 'done', limit: 4 });
      expect(done.seen.map((i) => i.id).sort()).toEqual(ids.slice(0, 10).sort());
      expect((await all(backend.ledger, runId, { state: 'failed', limit: 100 })).seen.map((i) => i.error).sort()).toEqual([
        'item 10: backend answered 500',
        'item 11: backend answered 500',
        'item 12: backend answered 500',
      ]);

      const other = uniqueName('pages');
      await backend.ledger.createRun(other, {}, clock.now(), shards ? { shards } : {});
      await backend.ledger.enqueue(
        other,
        Array.from({ length: 6 }, (_, n) => ({ other: n })),
        clock.now(),
      );
      const foreign = (await backend.ledger.items(other, { limit: 2 })).next!;
      // A cursor of the other run either names a start this run does not have (DynamoDB: refused) or an id to go on from (PostgreSQL): never the other run's items.
      const read: Awaited<ReturnType<LedgerStore['items']>> | Error = await backend.ledger
        .items(runId, { limit: 100, cursor: foreign })
        .catch((err: unknown) => err as Error);
      if (read instanceof Error) expect(read).toBeInstanceOf(BadCursorError);
      else expect(read.items.every((i) => i.runId === runId)).toBe(true);
      await expect(backend.ledger.items(runId, { limit: 5, cursor: 'not-a-cursor' })).rejects.toBeInstanceOf(BadCursorError);
    });
  }

  it('runs listed newest first, every run once across pages', async () => {
    const made: string[] = [];
    for (let n = 0; n < 5; n++) {
      const id = uniqueName(`listed${n}`);
      await backend.ledger.createRun(id, { n }, clock.now());
      made.push(id);
      clock.advance(1_000);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await backend.ledger.listRuns({ limit: 2, ...(cursor ? { cursor } : {}) });
      expect(page.runs.length).toBeLessThanOrEqual(2);
      seen.push(...page.runs.map((r) => r.id));
      if (!page.next) break;
      cursor = page.next;
    }
    expect(seen.filter((id) => made.includes(id))).toEqual([...made].reverse());
    expect(new Set(seen).size).toBe(seen.length);
    await expect(backend.ledger.listRuns({ limit: 2, cursor: '!' })).rejects.toBeInstanceOf(BadCursorError);
  });
});
