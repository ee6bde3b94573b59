/**
 * The actuator port's contract: every actuator, over its real target (nginx;
 * Lambda aliases and ELBv2 rules on moto; a webhook receiver with and
 * without revisions), passes the same cases. Decisions
 * are the reconciler's `decide`, as in production: an actuator only reads and
 * writes, and these cases show that what it reads is enough to decide right.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TargetMovedError, type Desired, type Stamp } from '../../shared/actuation/port.js';
import { decide } from '../../shared/actuation/reconcile.js';
import type { ActuatorFixture, ActuatorUnderTest } from '../support/actuators/fixture.js';
import { albWeightsFixture } from '../support/actuators/alb-weights.js';
import { lambdaAliasFixture } from '../support/actuators/lambda-alias.js';
import { nginxFixture } from '../support/actuators/nginx.js';
import { webhookFixture } from '../support/actuators/webhook.js';

const moto = process.env.ROLLOUT_MOTO_URL;
if (!moto) throw new Error('ROLLOUT_MOTO_URL is not set: run through npm test (the harness starts moto)');
const fixtures: ActuatorFixture[] = [
  nginxFixture(),
  albWeightsFixture(moto),
  lambdaAliasFixture(moto),
  webhookFixture({ revisions: true }),
  webhookFixture({ revisions: false }),
];

describe.each(fixtures.map((f) => [f.kind, f] as const))('actuator contract: %s', (_kind, fixture) => {
  let t: ActuatorUnderTest;
  beforeAll(async () => {
    t = await fixture.setup();
  }, 120_000);
  afterAll(async () => t?.close());

  const rollout = { version: 3, ended: false };
  const desired = (percent: number, o: Partial<Desired> = {}): Desired => ({
    rolloutId: 'r-contract',
    attempt: 1,
    stage: 0,
    percent,
    final: false,
    newVersion: t.newVersion,
    version: 3,
    ...o,
  });
  const stampOf = (d: Desired, epoch: number): Stamp => ({
    rolloutId: d.rolloutId,
    attempt: d.attempt,
    stage: d.stage,
    epoch,
    percent: d.percent,
    final: d.final,
    version: d.version,
  });
  const read = () => t.actuator.read(t.newVersion);

  it('a target at rest, never written: nothing on the new side, no stamp; ours to take', async () => {
    const observed = await read();
    expect(observed).toMatchObject({ percent: 0, final: false, stamp: null });
    expect(observed.foreignSplit).toBeUndefined();
    expect(decide(desired(10), observed, 5, null, rollout)).toEqual({ kind: 'write' });
  });

  it('apply and verify: the write is read back with its stamp; deciding again finds it converged', async () => {
    const d = desired(10);
    const after = await t.actuator.write(d, stampOf(d, 5), await read());
    expect(after).toMatchObject({ percent: 10, final: false, stamp: { rolloutId: 'r-contract', attempt: 1, stage: 0, epoch: 5, percent: 10, final: false } });
    const again = await read();
    expect(again).toMatchObject({ percent: 10, stamp: after.stamp });
    expect(decide(d, again, 5, null, rollout)).toEqual({ kind: 'converged' });
    if (t.measuredPercent) expect(Math.abs((await t.measuredPercent()) - 10)).toBeLessThanOrEqual(3);
  });

  it('a lost reply: the same write made again on the reading it was decided on either lands the same or is refused as moved; the target carries it', async () => {
    const d = desired(25, { stage: 1 });
    const before = await read();
    await t.actuator.write(d, stampOf(d, 5), before);
    // The reply was lost: the caller retries on the reading it had.
    await t.actuator.write(d, stampOf(d, 5), before).catch((err: unknown) => {
      expect(err).toBeInstanceOf(TargetMovedError);
    });
    const now = await read();
    expect(now).toMatchObject({ percent: 25, stamp: { stage: 1, epoch: 5, percent: 25 } });
    expect(decide(d, now, 5, null, rollout)).toEqual({ kind: 'converged' });
  });

  it('a higher epoch stamped it: a lower epoch decides to leave it, and a write decided before that stamp landed is refused', async () => {
    const zombie = desired(10, { stage: 0 });
    const readByZombie = await read();
    const newer = desired(50, { stage: 2 });
    await t.actuator.write(newer, stampOf(newer, 9), readByZombie);
    const now = await read();
    expect(decide(zombie, now, 5, null, rollout)).toEqual({ kind: 'superseded', epoch: 9 });
    // The zombie's write, decided on what it read before the newer leader wrote.
    await expect(t.actuator.write(zombie, stampOf(zombie, 5), readByZombie)).rejects.toBeInstanceOf(TargetMovedError);
    expect(await read()).toMatchObject({ percent: 50, stamp: { epoch: 9, stage: 2 } });
  });

  it('an older state of the same rollout, written by the same epoch on an older reading, is refused and decided against: never undoes a newer one', async () => {
    const older = desired(10, { stage: 0, version: 3 });
    const readBefore = await read();
    const newer = desired(50, { stage: 2, version: 4 });
    await t.actuator.write(newer, stampOf(newer, 9), readBefore);
    await expect(t.actuator.write(older, stampOf(older, 9), readBefore)).rejects.toBeInstanceOf(TargetMovedError);
    expect(decide(older, await read(), 9, null, rollout)).toEqual({ kind: 'superseded', epoch: 9 });
    expect(await read()).toMatchObject({ percent: 50, stamp: { epoch: 9, stage: 2, version: 4 } });
  });

  it('drift: someone else changes the weights under our stamp; deciding finds drift naming what was found, and nothing is written', async () => {
    await t.tamper(30);
    const found = await read();
    expect(found.percent).toBe(30);
    const verdict = decide(desired(50, { stage: 2, version: 4 }), found, 9, null, rollout);
    expect(verdict.kind).toBe('drift');
    expect(verdict.kind === 'drift' && verdict.reason).toMatch(/we wrote 50%, found 30%/);
  });

  it('a rollback: 0 on the new side, everything on stable', async () => {
    const d = desired(0, { stage: null, version: 5 });
    const after = await t.actuator.write(d, stampOf(d, 9), await read());
    expect(after).toMatchObject({ percent: 0, final: false, stamp: { stage: null, percent: 0 } });
    if (t.measuredPercent) expect(await t.measuredPercent()).toBe(0);
  });

  it('completion: the target is finalised on the new version', async () => {
    const d = desired(100, { stage: 3, final: true, version: 6 });
    const after = await t.actuator.write(d, stampOf(d, 9), await read());
    // A finalised target carries all of it: a split at 100 % (nginx, ELBv2) or the version itself (an alias).
    expect(after).toMatchObject({ final: true, stamp: { final: true, percent: 100 } });
    expect(decide(d, after, 9, null, { version: 9, ended: true })).toEqual({ kind: 'converged' });
    if (t.measuredPercent) expect(await t.measuredPercent()).toBe(100);
  });
});
