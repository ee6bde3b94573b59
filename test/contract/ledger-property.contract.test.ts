/**
 * Property: whatever the schedule of claims, starts, acks, heartbeats, steals,
 * failure scans, clock jumps, worker crashes, coordinator restarts and a
 * deposed coordinator acting late — every item ends Done exactly once with
 * its own result, no result is recorded twice, and none is lost.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { FencedError } from '../../shared/lease/fencing.js';
import { Coordinator, NotCoordinatorError } from '../../shared/ledger/coordinator.js';
import { contentId } from '../../shared/ledger/model.js';
import { coordinatorLease } from '../../shared/ledger/store.js';
import { ack, claim, heartbeat, start } from '../../shared/ledger/transitions.js';
import { forEachBackend, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const RUNS = Number(process.env.LEDGER_PROPERTY_RUNS ?? 200);
const ITEMS = 4;
const TIMEOUT = 30_000;
const LEASE = { ttlMs: TIMEOUT, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

type Step =
  | { t: 'claim' | 'start' | 'ack' | 'beat' | 'crash' | 'steal' | 'resubmit'; w: number }
  | { t: 'scan' | 'restartCoordinator' | 'oldCoordinatorSteals' }
  | { t: 'advance'; ms: number };

const w = fc.integer({ min: 0, max: 1 });
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant('claim' as const), w }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('start' as const), w }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('ack' as const), w }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('beat' as const), w }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('resubmit' as const), w }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('crash' as const), w }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('steal' as const), w }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('scan' as const) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('restartCoordinator' as const) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('oldCoordinatorSteals' as const) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('advance' as const), ms: fc.constantFrom(5_000, 20_000, 40_000) }) },
);

const resultOf = (payload: unknown) => ({ output: contentId(payload) });

forEachBackend('ledger property on %s', (backend, backendName) => {
  it(`${RUNS} schedules: every item Done exactly once, no result twice, none lost`, { timeout: 600_000 }, async () => {
    const clock = new ManualClock();
    const seen = { steals: 0, repends: 0, fenced: 0, restarts: 0, crashes: 0 };
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 30 }), async (steps) => {
        const runId = uniqueName('run');
        const { ledger } = backend;
        await ledger.createRun(runId, {}, clock.now());
        const payloads = Array.from({ length: ITEMS }, (_, i) => ({ runId, i }));
        const { ids } = await ledger.enqueue(runId, payloads, clock.now());
        const acks = new Map<string, number>();
        let generation = 0;
        const mkCoordinator = async () => {
          // Its own view of time: it follows the shared clock until the process is paused (frozen).
          const own = { frozenAt: null as number | null, now: () => own.frozenAt ?? clock.now() };
          const elector = new LeaseElector(backend.runLeases(runId), { name: coordinatorLease(runId), holderId: `c${generation++}`, clock: own, ...LEASE });
          await elector.campaign();
          return { own, elector, c: new Coordinator({ runId, ledger, elector, bus: new InProcessBus(), failureTimeoutMs: TIMEOUT, clock: own }) };
        };
        let current = await mkCoordinator();
        let previous: typeof current | null = null;
        const workers = ['w0', 'w1'];
        let incarnation = 0;
        const mine = async (id: string, started: boolean) => (await ledger.running(runId)).filter((i) => i.worker === id && i.started === started);
        const tolerate = (err: unknown) => {
          if (err instanceof FencedError) seen.fenced++;
          else if (!(err instanceof NotCoordinatorError)) throw err;
        };
        const submitted: { worker: string; itemId: string }[] = [];
        const doAck = async (worker: string, itemId: string) => {
          const item = (await ledger.get(runId, itemId))!;
          const out = await ledger.cas(ack(runId, itemId, worker, resultOf(item.payload)), clock.now());
          if (out.ok) acks.set(itemId, (acks.get(itemId) ?? 0) + 1);
          submitted.push({ worker, itemId });
        };

        for (const s of steps) {
          const worker = 'w' in s ? workers[s.w]! : '';
          switch (s.t) {
            case 'claim': {
              const [next] = await ledger.pending(runId, 1);
              if (next) await ledger.cas(claim(runId, next.id, worker, current.elector.token()?.epoch ?? 0, clock.now()), clock.now());
              break;
            }
            case 'start':
              for (const i of (await mine(worker, false)).slice(0, 1)) await ledger.cas(start(runId, i.id, worker, clock.now()), clock.now());
              break;
            case 'ack':
              for (const i of (await mine(worker, true)).slice(0, 1)) await doAck(worker, i.id);
              break;
            case 'resubmit': {
              // A submission retried after a lost reply: it must not record a second result.
              const earlier = submitted.find((x) => x.worker === worker);
              if (earlier) await doAck(earlier.worker, earlier.itemId);
              break;
            }
            case 'beat':
              for (const i of [...(await mine(worker, true)), ...(await mine(worker, false))])
                await ledger.cas(heartbeat(runId, i.id, worker, clock.now()), clock.now());
              break;
            case 'crash':
              seen.crashes++;
              workers[s.w] = `w${s.w}-${++incarnation}`; // a new process: what the old one held is left to the failure scan
              break;
            case 'steal':
              await current.elector.campaign();
              seen.steals += (await current.c.stealFor(worker).catch((e: unknown) => (tolerate(e), { items: [] }))).items.length;
              break;
            case 'scan':
              await current.elector.campaign();
              seen.repends += (await current.c.failureScan().catch((e: unknown) => (tolerate(e), { repended: [] }))).repended.length;
              break;
            case 'advance':
              clock.advance(s.ms);
              break;
            case 'restartCoordinator':
              // The coordinator's process is paused (not stopped: it still believes it leads); a successor takes over.
              seen.restarts++;
              current.own.frozenAt = clock.now();
              clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
              previous = current;
              current = await mkCoordinator();
              break;
            case 'oldCoordinatorSteals':
              if (previous) await previous.c.stealFor(workers[0]!).catch(tolerate);
              break;
          }
        }

        // Finish: time passes, the coordinator re-pends what crashed workers left, a fresh worker does the rest.
        for (let round = 0; round < 50; round++) {
          const counts = await ledger.counts(runId);
          if (counts.done === ITEMS) break;
          clock.advance(TIMEOUT + 1);
          await current.elector.campaign();
          if (!current.elector.token()) current = await mkCoordinator();
          await current.c.failureScan().catch(tolerate);
          for (const p of await ledger.pending(runId, ITEMS)) {
            const got = await ledger.cas(claim(runId, p.id, 'finisher', 0, clock.now()), clock.now());
            if (got.ok && (await ledger.cas(start(runId, p.id, 'finisher', clock.now()), clock.now())).ok) await doAck('finisher', p.id);
          }
        }

        expect(await ledger.counts(runId), 'none lost, none failed').toEqual({ pending: 0, running: 0, done: ITEMS, failed: 0 });
        for (const [i, id] of ids.entries()) {
          expect(acks.get(id), `item ${i}: one recorded result`).toBe(1);
          expect((await ledger.get(runId, id))!.resultHash).toBe(contentId(resultOf(payloads[i])));
        }
      }),
      {
        numRuns: RUNS,
        // Run first, so each kind of event the assertions below count happens whatever the random draws:
        // a silent worker's item re-pended (claimed, then scans a failure timeout apart), a steal, and a
        // deposed coordinator's steal refused by the fence (w1 holds three unstarted items it may take).
        examples: [
          [[{ t: 'claim', w: 0 }, { t: 'scan' }, { t: 'advance', ms: 40_000 }, { t: 'scan' }, { t: 'advance', ms: 40_000 }, { t: 'scan' }]],
          [[{ t: 'claim', w: 0 }, { t: 'claim', w: 0 }, { t: 'steal', w: 1 }, { t: 'restartCoordinator' }, { t: 'oldCoordinatorSteals' }]],
          [[{ t: 'claim', w: 1 }, { t: 'claim', w: 1 }, { t: 'claim', w: 1 }, { t: 'restartCoordinator' }, { t: 'oldCoordinatorSteals' }]],
        ],
      },
    );
    console.log(`[ledger property ${backendName}] ${JSON.stringify(seen)}`);
    expect(seen.steals).toBeGreaterThan(0);
    expect(seen.repends).toBeGreaterThan(0);
    expect(seen.restarts).toBeGreaterThan(0);
    expect(seen.fenced).toBeGreaterThan(0);
  });
});
