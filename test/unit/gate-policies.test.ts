/**
 * What a gate's failures do (onFail) and gates on trial (dryRun), on the
 * pure verdict every runtime evaluates: rollback stays the default, pause
 * stops where it is, hold only keeps the stage from promoting, a dry-run
 * gate is never acted on, and consecutiveSuccesses asks for passes in a row.
 */
import { describe, expect, it } from 'vitest';
import { providerGatesSchema, type ProviderGate } from '../../shared/rollout/gate-spec.js';
import { passStreakOf, providerVerdict, tallyWith, type GateReading, type GateTally } from '../../shared/rollout/gates.js';

const origin = 1_000;
const gate = (o: Record<string, unknown> = {}) =>
  providerGatesSchema.parse([{ type: 'prometheus', name: 'errors', address: 'http://prometheus:9090', query: 'q', comparison: '<', threshold: 1, ...o }])[0]!;

/** The tallies a run of readings of `g` (outcomes in order) makes in stage 0. */
function tallies(g: ProviderGate, outcomes: readonly GateReading['outcome'][], at = (i: number) => origin + i): Map<number, Map<string, GateTally>> {
  let t: GateTally | undefined;
  outcomes.forEach((outcome, i) => {
    const reading: GateReading = {
      gate: g.name,
      type: g.type,
      attempt: 1,
      stage: 0,
      at: at(i),
      outcome,
      value: outcome === 'pass' ? 0 : 2,
      query: 'q',
      answer: '',
      reason: outcome === 'pass' ? null : `reading ${i} ${outcome}`,
      source: 'poll',
    };
    t = tallyWith(t, reading, origin) ?? t;
  });
  return new Map([[0, new Map(t ? [[g.name, t]] : [])]]);
}

describe('a gate past its failureLimit', () => {
  it('rolls back by default, and pauses with onFail pause, naming the gate and the last failure', () => {
    const g = gate();
    expect(providerVerdict([g], tallies(g, ['pass', 'fail']), 0, origin)).toMatchObject({
      kind: 'rollback',
      reason: 'gate errors (prometheus): 1 failed reading > failureLimit 0; last: reading 1 fail',
    });
    const p = gate({ onFail: 'pause' });
    expect(providerVerdict([p], tallies(p, ['pass', 'fail']), 0, origin)).toMatchObject({
      kind: 'pause',
      reason: 'gate errors (prometheus): 1 failed reading > failureLimit 0; last: reading 1 fail',
    });
  });

  it('with onFail hold, waits while its newest reading fails and promotes once it passes again', () => {
    const h = gate({ onFail: 'hold' });
    expect(providerVerdict([h], tallies(h, ['fail', 'fail']), 0, origin)).toEqual({
      kind: 'wait',
      reason: 'gate errors (prometheus): last reading fail (onFail hold: the stage waits while it fails)',
    });
    expect(providerVerdict([h], tallies(h, ['fail', 'fail', 'pass']), 0, origin)).toMatchObject({ kind: 'pass' });
    // Its inconclusive readings still pause past their limit: hold is about failures only.
    expect(providerVerdict([h], tallies(h, ['inconclusive', 'inconclusive', 'inconclusive']), 0, origin)).toMatchObject({ kind: 'pause' });
  });
});

describe('a dry-run gate', () => {
  it('never rolls back, pauses or holds, and a stage promotes on the others', () => {
    const trial = gate({ name: 'trial', dryRun: true });
    const real = gate({ name: 'real' });
    const both = new Map([
      [0, new Map([...tallies(trial, ['fail', 'fail', 'inconclusive', 'inconclusive', 'inconclusive']).get(0)!, ...tallies(real, ['pass']).get(0)!])],
    ]);
    const verdict = providerVerdict([trial, real], both, 0, origin);
    expect(verdict).toMatchObject({ kind: 'pass' });
    // The readings that allowed it are the acting gates' only.
    expect(verdict.kind === 'pass' && verdict.readings.map((r) => r.gate)).toEqual(['real']);
    // Nor does it wait for a first reading.
    expect(providerVerdict([trial, real], tallies(real, ['pass']), 0, origin)).toMatchObject({ kind: 'pass' });
  });

  it('is refused with a misspelt policy, naming the field', () => {
    expect(() => gate({ onFail: 'stop' })).toThrow(/onFail/);
    expect(() => gate({ dryRun: 'yes' })).toThrow(/dryRun/);
  });
});

describe('consecutiveSuccesses', () => {
  it('holds the stage until that many readings in a row have passed; a failure or an inconclusive reading starts the count again', () => {
    const g = gate({ consecutiveSuccesses: 3, failureLimit: 5, inconclusiveLimit: 5 });
    const verdict = (outcomes: GateReading['outcome'][]) => providerVerdict([g], tallies(g, outcomes), 0, origin);
    expect(verdict(['pass', 'pass'])).toEqual({ kind: 'wait', reason: 'gate errors (prometheus): 2 of 3 passes in a row (consecutiveSuccesses)' });
    expect(verdict(['pass', 'pass', 'pass'])).toMatchObject({ kind: 'pass' });
    expect(verdict(['pass', 'pass', 'fail', 'pass', 'pass'])).toEqual({
      kind: 'wait',
      reason: 'gate errors (prometheus): 2 of 3 passes in a row (consecutiveSuccesses)',
    });
    expect(verdict(['pass', 'inconclusive', 'pass', 'pass', 'pass'])).toMatchObject({ kind: 'pass' });
    // Absent, the newest reading alone decides, as before.
    expect(providerVerdict([gate({ failureLimit: 1 })], tallies(gate(), ['fail', 'pass']), 0, origin)).toMatchObject({ kind: 'pass' });
  });

  it('a pass stored late adds nothing; a failure stored late ends the streak, since it may have been taken inside it', () => {
    const g = gate({ consecutiveSuccesses: 2, failureLimit: 5 });
    // Readings taken at +0, +2, +1: the failure arrives last but was taken between the two passes.
    const late = tallies(g, ['pass', 'pass', 'fail'], (i) => origin + [0, 2, 1][i]!);
    expect(late.get(0)!.get('errors')).toMatchObject({ passStreak: 0, failures: 1, last: { outcome: 'pass' } });
    expect(providerVerdict([g], late, 0, origin)).toMatchObject({ kind: 'wait', reason: expect.stringContaining('0 of 2') as string });
    // A late pass does not extend a streak: +0 pass, +2 pass, +1 pass is two in a row, not three.
    const passes = tallies(gate({ consecutiveSuccesses: 3 }), ['pass', 'pass', 'pass'], (i) => origin + [0, 2, 1][i]!);
    expect(passes.get(0)!.get('errors')).toMatchObject({ passStreak: 2 });
  });

  it('reads a tally stored before streaks were kept as a streak of one when its newest reading passed', () => {
    const g = gate({ consecutiveSuccesses: 2 });
    const t = tallies(g, ['pass']).get(0)!.get('errors')!;
    const { passStreak: _, ...old } = t;
    expect(passStreakOf(old as GateTally)).toBe(1);
    expect(tallyWith(old as GateTally, { ...t.last, at: origin + 5 }, origin)).toMatchObject({ passStreak: 2 });
  });

  it('is refused unless a whole number from 1, naming the field', () => {
    expect(() => gate({ consecutiveSuccesses: 0 })).toThrow(/consecutiveSuccesses/);
    expect(() => gate({ consecutiveSuccesses: 1.5 })).toThrow(/consecutiveSuccesses/);
  });
});
