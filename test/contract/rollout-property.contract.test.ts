/**
 * Property: whatever the interleaving of ticks, events, lease steals, crashes,
 * stale evaluations and manual commands — also two at once —
 *   no stage is promoted twice, no promoted stage is reverted, no rolled-back
 *   stage is promoted, no write lands under a stale epoch (the event log's
 *   epochs never go down), and a completed rollout has every stage promoted
 *   in order.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { FencedError } from '../../shared/lease/fencing.js';
import type { LeaseToken } from '../../shared/lease/record.js';
import type { Command } from '../../shared/rollout/command-names.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { evaluate } from '../../shared/rollout/evaluate.js';
import { activeStage, type StagePhase } from '../../shared/rollout/model.js';
import { BatchPromoter, StreamingPromoter } from '../../shared/rollout/promoters.js';
import { planTransition, TransitionRejectedError, type TransitionPlan } from '../../shared/rollout/transitions.js';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const RUNS = Number(process.env.ROLLOUT_PROPERTY_RUNS ?? 200);
const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
const SPEC = {
  target: { service: 'svc', version: 'v2' },
  stages: [
    { name: 's0', percent: 10, bakeSeconds: 60, gates: { maxErrorRate: 0.1, minRequests: 10 } },
    { name: 's1', percent: 50, bakeSeconds: 60, gates: { maxErrorRate: 0.1, minRequests: 10 } },
    { name: 's2', percent: 100, bakeSeconds: 0 },
  ],
};

type Simple =
  | { t: 'tick'; n: number }
  | { t: 'metrics'; n: number; healthy: boolean }
  | { t: 'advance'; ms: number }
  | { t: 'renew'; n: number }
  | { t: 'crash'; n: number }
  | { t: 'read'; n: number }
  | { t: 'applyStale'; n: number }
  | { t: 'command'; n: number; cmd: Command }
  /** Evaluate on n, let `interference` happen, then write n's now-older decision: the pattern that breaks a promotion conditioned on phase != 'promoted'. */
  | { t: 'race'; n: number; interference: 'breach' | 'steal' | 'tick' | 'pause' };
type Step = Simple | { t: 'pair'; a: Simple; b: Simple };

const nodeIx = fc.integer({ min: 0, max: 1 });
const simple: fc.Arbitrary<Simple> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant('tick' as const), n: nodeIx }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('metrics' as const), n: nodeIx, healthy: fc.integer({ min: 0, max: 9 }).map((x) => x > 0) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('advance' as const), ms: fc.constantFrom(1_000, 20_000, 61_000) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('renew' as const), n: nodeIx }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('crash' as const), n: nodeIx }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('read' as const), n: nodeIx }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('applyStale' as const), n: nodeIx }) },
  {
    weight: 1,
    arbitrary: fc.record({ t: fc.constant('command' as const), n: nodeIx, cmd: fc.constantFrom<Command>('pause', 'resume', 'promote', 'abort', 'retry') }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('race' as const),
      n: nodeIx,
      interference: fc.constantFrom('breach' as const, 'steal' as const, 'tick' as const, 'pause' as const),
    }),
  },
);
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: simple },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('pair' as const), a: simple, b: simple }) },
);

// Between two observations (one step may activate and then promote or roll back a stage).
const ALLOWED: Record<StagePhase, readonly StagePhase[]> = {
  pending: ['pending', 'active', 'promoted', 'rolled_back'],
  active: ['active', 'promoted', 'rolled_back'],
  promoted: ['promoted'],
  rolled_back: ['rolled_back'],
};

forEachBackend('rollout promotion property on %s', (backend, backendName) => {
  it(`${RUNS} random interleavings keep promotion monotonic, fenced and final`, { timeout: 600_000 }, async () => {
    const clock = new ManualClock();
    let run = 0;
    const seenOutcomes = { completed: 0, rolledBack: 0, fenced: 0, staleRejected: 0, promotions: 0 };
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 25 }), async (steps) => {
        run++;
        const mkNode = (holder: string) => {
          const elector = new LeaseElector(backend.store, { name: 'promotion_leader', holderId: holder, clock, ...LEASE });
          const engine = new RolloutEngine({ store: backend.rollouts, bus: new InProcessBus(), clock });
          const leadership = campaignEachTime(elector);
          return {
            elector,
            engine,
            batch: new BatchPromoter(engine, leadership),
            streaming: new StreamingPromoter(engine, leadership),
            stale: null as { plan: TransitionPlan; token: LeaseToken } | null,
          };
        };
        let restarts = 0;
        const nodes = [mkNode(`A${run}`), mkNode(`B${run}`)];
        const { id } = await createRollout(nodes[0]!.engine, { spec: SPEC, actor: 'test' });
        const seen = new Map<string, StagePhase>();

        const expected = (err: unknown) => {
          if (err instanceof FencedError) seenOutcomes.fenced++;
          return err instanceof FencedError || err instanceof TransitionRejectedError;
        };
        const act = async (s: Simple): Promise<void> => {
          const n = nodes['n' in s ? s.n : 0]!;
          try {
            switch (s.t) {
              case 'tick':
                await n.batch.tick();
                break;
              case 'metrics': {
                const view = (await backend.rollouts.load(id))!;
                const stage = activeStage(view)?.index ?? 0;
                await n.streaming.handle({
                  type: 'rollout.metrics_reported',
                  rolloutId: id,
                  stage,
                  requests: 100,
                  errors: s.healthy ? 1 : 50,
                  p99LatencyMs: null,
                  observedAt: clock.now(),
                });
                break;
              }
              case 'advance':
                clock.advance(s.ms);
                break;
              case 'renew':
                await n.elector.campaign();
                break;
              case 'crash':
                nodes[s.n] = mkNode(`${s.n ? 'B' : 'A'}${run}-${++restarts}`); // a new process: new identity, no memory
                break;
              case 'read': {
                const view = (await backend.rollouts.load(id))!;
                const decision = evaluate(view, clock.now());
                const token = n.elector.token();
                n.stale =
                  decision && token ? { plan: planTransition(view, decision, { now: clock.now(), token, actor: `promoter:${token.holder}` }), token } : null;
                break;
              }
              case 'applyStale':
                // An evaluation made earlier, written now: by then the state or the lease may have moved on.
                if (n.stale && !(await backend.rollouts.apply(n.stale.token, n.stale.plan))) seenOutcomes.staleRejected++;
                n.stale = null;
                break;
              case 'command': {
                const token = n.elector.token();
                if (token) await runCommand(n.engine, token, { rolloutId: id, command: s.cmd, actor: 'operator' });
                break;
              }
              case 'race': {
                const other = nodes[1 - s.n]!;
                // Make a promotion due but not yet made: healthy metrics stored without evaluating, bake elapsed.
                const before = (await backend.rollouts.load(id))!;
                const due = activeStage(before);
                if (due)
                  await backend.rollouts.recordMetrics(
                    id,
                    { stage: due.index, attempt: before.rollout.attempt },
                    { requests: 100, errors: 0, p99LatencyMs: null, observedAt: clock.now() },
                  );
                clock.advance(60_000);
                await act({ t: 'renew', n: s.n });
                await act({ t: 'read', n: s.n });
                if (s.interference === 'breach') {
                  // The same node's streaming path, same epoch: fencing cannot tell the two writers apart.
                  await n.streaming.handle({
                    type: 'rollout.metrics_reported',
                    rolloutId: id,
                    stage: activeStage((await backend.rollouts.load(id))!)?.index ?? 0,
                    requests: 100,
                    errors: 60,
                    p99LatencyMs: null,
                    observedAt: clock.now(),
                  });
                } else if (s.interference === 'steal') {
                  clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
                  await other.batch.tick();
                } else if (s.interference === 'tick') {
                  await other.batch.tick();
                } else {
                  await act({ t: 'command', n: 1 - s.n, cmd: 'pause' });
                }
                await act({ t: 'applyStale', n: s.n });
                break;
              }
            }
          } catch (err) {
            if (!expected(err)) throw err;
          }
        };

        for (const s of steps) {
          if (s.t === 'pair') await Promise.all([act(s.a), act(s.b)]);
          else await act(s);
          const view = (await backend.rollouts.load(id))!;
          for (const st of view.stages) {
            const key = `${view.rollout.attempt}/${st.index}`;
            const before = seen.get(key) ?? 'pending';
            expect(ALLOWED[before], `${key}: ${before} → ${st.phase}`).toContain(st.phase);
            seen.set(key, st.phase);
          }
        }

        const view = (await backend.rollouts.load(id))!;
        const events = await backend.rollouts.events(id);
        const promotions = new Set<string>();
        const ended = new Set<number>();
        let lastEpoch = -1;
        for (const e of events) {
          expect(e.detail.epoch, `epoch went down at ${e.detailType}`).toBeGreaterThanOrEqual(lastEpoch);
          lastEpoch = e.detail.epoch;
          const attempt = e.detail.attempt;
          if (e.detailType === 'ai.rollout.stage_promoted') {
            const key = `${attempt}/${e.detail.stage!.index}`;
            expect(promotions.has(key), `stage ${key} promoted twice`).toBe(false);
            expect(ended.has(attempt), `promotion after rollback/abort in attempt ${attempt}`).toBe(false);
            promotions.add(key);
            seenOutcomes.promotions++;
          }
          if (e.detailType === 'ai.rollout.rollback_detected' || e.detailType === 'ai.rollout.aborted') ended.add(attempt);
        }
        for (const st of view.stages) {
          if (st.phase === 'promoted') expect(promotions.has(`${view.rollout.attempt}/${st.index}`), `stage ${st.index} promoted without its event`).toBe(true);
        }
        if (view.rollout.state === 'rolled_back') seenOutcomes.rolledBack++;
        if (view.rollout.state === 'completed') {
          seenOutcomes.completed++;
          expect(view.stages.every((s) => s.phase === 'promoted')).toBe(true);
          const order = events
            .filter((e) => e.detailType === 'ai.rollout.stage_promoted' && e.detail.attempt === view.rollout.attempt)
            .map((e) => e.detail.stage!.index);
          expect(order).toEqual([...order].sort((a, b) => a - b));
        }

        // Leave nothing running for the next run's ticks: a janitor takes the lease and aborts.
        if (view.rollout.state === 'running' || view.rollout.state === 'paused') {
          clock.advance(LEASE.ttlMs + LEASE.clockSkewMs);
          const janitor = mkNode(`J${run}`);
          await janitor.elector.campaign();
          await runCommand(janitor.engine, janitor.elector.token()!, { rolloutId: id, command: 'abort', actor: 'janitor' });
          await janitor.elector.resign();
        }
      }),
      { numRuns: RUNS },
    );
    expect(run).toBeGreaterThanOrEqual(RUNS);
    // Not vacuous: the runs reached every outcome the invariants are about.
    console.log(`[property ${backendName}] ${JSON.stringify(seenOutcomes)}`);
    expect(seenOutcomes.completed).toBeGreaterThan(0);
    expect(seenOutcomes.rolledBack).toBeGreaterThan(0);
    expect(seenOutcomes.fenced).toBeGreaterThan(0);
    expect(seenOutcomes.staleRejected).toBeGreaterThan(0);
  });
});
