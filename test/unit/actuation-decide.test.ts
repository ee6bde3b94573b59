import { describe, expect, it } from 'vitest';
import type { Desired, Observed, Stamp } from '../../shared/actuation/port.js';
import { outranks, parseStamp, stampText } from '../../shared/actuation/port.js';
import { decide, desiredOf } from '../../shared/actuation/reconcile.js';
import type { ActuationRecord } from '../../shared/rollout/actuation-record.js';
import type { RolloutView } from '../../shared/rollout/model.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';

const d = (o: Partial<Desired> = {}): Desired => ({ rolloutId: 'r1', attempt: 1, stage: 1, percent: 25, final: false, newVersion: '7', version: 5, ...o });
const stamp = (o: Partial<Stamp> = {}): Stamp => ({ rolloutId: 'r1', attempt: 1, stage: 0, epoch: 4, percent: 10, final: false, ...o });
const seen = (o: Partial<Observed> = {}): Observed => ({ percent: 0, final: false, stamp: null, detail: 'as found', ...o });
const running = { version: 5, ended: false };
const record = (o: Partial<ActuationRecord> = {}): ActuationRecord => ({
  rolloutId: 'r1',
  target: 'web',
  kind: 'nginx',
  attempt: 1,
  stage: 0,
  percent: 10,
  final: false,
  epoch: 4,
  state: 'converged',
  reason: null,
  observed: null,
  stamp: null,
  appliedAt: null,
  updatedAt: 0,
  driftVersion: null,
  settled: false,
  ...o,
});

describe('decide: whether the leader writes a target', () => {
  it('writes a target at rest that no one stamped, and one it stamped itself at an earlier stage', () => {
    expect(decide(d(), seen(), 4, null, running)).toEqual({ kind: 'write' });
    expect(decide(d(), seen({ percent: 10, stamp: stamp() }), 4, null, running)).toEqual({ kind: 'write' });
  });

  it('leaves converged alone: stamp and weights already say what is asked, under our epoch', () => {
    expect(decide(d(), seen({ percent: 25, stamp: stamp({ stage: 1, percent: 25 }) }), 4, null, running)).toEqual({ kind: 'converged' });
  });

  it('stamps again what a deposed leader stamped, even when it carries what is asked: the bar its other late writes meet becomes ours', () => {
    expect(decide(d(), seen({ percent: 25, stamp: stamp({ stage: 1, percent: 25, epoch: 3 }) }), 4, null, running)).toEqual({ kind: 'write' });
  });

  it('never overwrites a higher epoch, whatever it carries', () => {
    expect(decide(d(), seen({ percent: 10, stamp: stamp({ epoch: 9 }) }), 4, null, running)).toEqual({ kind: 'superseded', epoch: 9 });
  });

  it("a lower epoch of this rollout (a deposed leader's late write) is healed, not drift", () => {
    expect(decide(d({ percent: 0, stage: null }), seen({ percent: 10, stamp: stamp({ epoch: 2 }) }), 4, null, running)).toEqual({ kind: 'write' });
  });

  it('drift: our stamp with other weights, a split towards another version, a split someone else made', () => {
    const changed = decide(d(), seen({ percent: 40, stamp: stamp() }), 4, null, running);
    expect(changed).toMatchObject({ kind: 'drift', reason: expect.stringContaining('we wrote 10%, found 40%') as unknown });
    expect(decide(d(), seen({ percent: 0, stamp: stamp(), foreignSplit: '20% on 6' }), 4, null, running)).toMatchObject({
      kind: 'drift',
      reason: expect.stringContaining('20% on 6') as unknown,
    });
    expect(decide(d(), seen({ percent: 30 }), 4, null, running)).toMatchObject({
      kind: 'drift',
      reason: expect.stringContaining('no stamp of ours') as unknown,
    });
    expect(decide(d(), seen({ percent: 30, stamp: stamp({ rolloutId: 'r0' }) }), 4, null, running)).toMatchObject({
      kind: 'drift',
      reason: expect.stringContaining("rollout r0's stamp") as unknown,
    });
  });

  it('held while paused for drift; ours again once a person acted on the rollout (a later version)', () => {
    const drifted = record({ state: 'drift', driftVersion: 5 });
    const found = seen({ percent: 40, stamp: stamp() });
    expect(decide(d(), found, 4, drifted, running)).toEqual({ kind: 'held' });
    expect(decide(d(), found, 4, drifted, { version: 6, ended: false })).toEqual({ kind: 'write' });
  });

  it("an ended rollout never takes a target another holds or someone split; one at rest it stamps with its end (a deposed leader's first write then finds it outranked)", () => {
    const ended = { version: 7, ended: true };
    expect(decide(d({ percent: 0, stage: null }), seen({ percent: 30, stamp: stamp({ rolloutId: 'r2' }) }), 4, null, ended)).toEqual({
      kind: 'released',
      reason: 'held by rollout r2',
    });
    expect(decide(d({ percent: 0, stage: null }), seen({ percent: 30 }), 4, null, ended)).toMatchObject({ kind: 'released' });
    expect(decide(d({ percent: 0, stage: null }), seen(), 4, null, ended)).toEqual({ kind: 'write' });
    expect(decide(d({ percent: 100, final: true, stage: 3 }), seen(), 4, null, ended)).toEqual({ kind: 'write' });
  });

  it('a target whose stamp of ours is gone was rewritten by someone else: drift while the rollout runs, left alone once it has ended (never fought)', () => {
    const wrote = record({ stamp: stamp() });
    expect(decide(d(), seen(), 4, wrote, running)).toMatchObject({
      kind: 'drift',
      reason: expect.stringContaining('our stamp is gone (none is there)') as unknown,
    });
    expect(decide(d({ percent: 100, final: true, stage: 3 }), seen(), 4, wrote, { version: 9, ended: true })).toMatchObject({ kind: 'released' });
  });

  it("an older state of this rollout never undoes a newer one written under the same epoch (two processes of one leader, or a tick's old reading)", () => {
    expect(
      decide(d({ version: 5, stage: 0, percent: 10 }), seen({ percent: 25, stamp: stamp({ stage: 1, percent: 25, version: 6 }) }), 4, null, running),
    ).toEqual({ kind: 'superseded', epoch: 4 });
    expect(outranks(stamp({ version: 6 }), stamp({ version: 5 }))).toMatch(/version 6 of the rollout, ours is 5/);
    expect(outranks(stamp({ epoch: 5 }), stamp({ epoch: 4 }))).toMatch(/epoch 5, ours is 4/);
    expect(outranks(stamp({ rolloutId: 'r0', version: 9 }), stamp({ version: 5 }))).toBeNull();
    expect(outranks(null, stamp())).toBeNull();
  });

  it('a finalised target counts as all of it on the new version', () => {
    expect(
      decide(
        d({ percent: 100, final: true, stage: 3 }),
        seen({ percent: 0, final: true, stamp: stamp({ stage: 3, percent: 100, final: true }) }),
        4,
        null,
        running,
      ),
    ).toEqual({ kind: 'converged' });
  });
});

describe('desiredOf: what the committed state asks', () => {
  const spec = parseRolloutSpec({
    target: { service: 's', version: '7' },
    stages: [
      { name: 'a', percent: 10, bakeSeconds: 0 },
      { name: 'b', percent: 100, bakeSeconds: 0 },
    ],
    actuators: ['web'],
  });
  const view = (state: RolloutView['rollout']['state'], phases: ('pending' | 'active' | 'promoted' | 'rolled_back')[]) =>
    ({ rollout: { id: 'r1', spec, state, attempt: 2, version: 4 }, stages: phases.map((phase, index) => ({ index, phase })) }) as unknown as RolloutView;
  it('the active stage while running or paused, 0 after a rollback, all of it once completed', () => {
    expect(desiredOf(view('running', ['active', 'pending']))).toEqual({
      rolloutId: 'r1',
      attempt: 2,
      stage: 0,
      percent: 10,
      final: false,
      newVersion: '7',
      version: 4,
    });
    expect(desiredOf(view('paused', ['promoted', 'active']))).toMatchObject({ stage: 1, percent: 100, final: false });
    expect(desiredOf(view('rolled_back', ['rolled_back', 'pending']))).toMatchObject({ stage: null, percent: 0, final: false });
    expect(desiredOf(view('completed', ['promoted', 'promoted']))).toMatchObject({ stage: 1, percent: 100, final: true });
  });
});

describe('stamps as text', () => {
  it('round-trip, and anything else is no stamp', () => {
    const s = stamp({ base: '3', stage: null, version: 12 });
    expect(parseStamp(stampText(s))).toEqual(s);
    for (const text of [
      '',
      'deployed by ci',
      'rollout=r1 attempt=0 stage=- epoch=1 percent=1 final=true',
      'rollout=r1 attempt=1 stage=- epoch=1 percent=101 final=true',
      'rollout=r1 attempt=1 stage=x epoch=1 percent=1 final=true',
    ]) {
      expect(parseStamp(text)).toBeNull();
    }
  });
});
