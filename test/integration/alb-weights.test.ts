/**
 * The albWeights actuator through the unmodified ELBv2 SDK client against
 * moto: weighted forward actions on a listener rule and on a listener's
 * default action, the stamp tag, the epoch and reading checks that stand in
 * for the conditional write ELBv2 lacks, and ELBv2's refusals.
 *
 * moto accepts weights outside 0–999 and an unknown target group on
 * ModifyListener (AWS refuses both); it refuses an unknown target group on
 * ModifyRule, which is the refusal exercised here.
 */
import { DescribeListenersCommand, DescribeRulesCommand, DescribeTagsCommand, ModifyRuleCommand, type Rule } from '@aws-sdk/client-elastic-load-balancing-v2';
import { afterEach, describe, expect, it } from 'vitest';
import { AlbWeightsActuator, MAX_WEIGHT, STAMP_TAG, weightsFor } from '../../shared/adapters/actuators/alb-weights/actuator.js';
import { stampText, TargetMovedError, TargetRefusedError, type Desired, type Observed, type Stamp } from '../../shared/actuation/port.js';
import type { AlbWeightsTarget } from '../../shared/actuation/targets.js';
import { ALB_REGION, albWeightsFixture, createAlb, forwardAction, rulePercent, type AlbOnMoto } from '../support/actuators/alb-weights.js';

const moto = process.env.ROLLOUT_MOTO_URL;
if (!moto) throw new Error('ROLLOUT_MOTO_URL is not set: run through npm test (the harness starts moto)');

const stampOf = (epoch: number, percent: number, o: { final?: boolean; stage?: number | null } = {}): Stamp => ({
  rolloutId: 'r-alb',
  attempt: 1,
  stage: o.stage === undefined ? 0 : o.stage,
  epoch,
  percent,
  final: o.final ?? false,
});
const desiredOf = (s: Stamp): Desired => ({
  rolloutId: s.rolloutId,
  attempt: s.attempt,
  stage: s.stage,
  percent: s.percent,
  final: s.final,
  newVersion: 'canary',
  version: s.version ?? 1,
});

describe('weightsFor: ELBv2 weights for a percent with two decimals', () => {
  it('stays within 1–999 on each side of a split, and rounds back to all but 40 of the 10,001 percents', () => {
    const inexact: number[] = [];
    for (let h = 0; h <= 10_000; h++) {
      const p = h / 100;
      const w = weightsFor(p, false);
      for (const x of [w.stable, w.canary]) expect(Number.isInteger(x) && x >= 0 && x <= MAX_WEIGHT).toBe(true);
      if (p > 0) expect(w.canary).toBeGreaterThan(0);
      if (p < 100) expect(w.stable).toBeGreaterThan(0);
      const back = Math.round((w.canary * 10_000) / (w.stable + w.canary)) / 100;
      expect(Math.abs(back - p)).toBeLessThanOrEqual(0.09 + 1e-9);
      if (back !== p) inexact.push(p);
    }
    expect(inexact).toHaveLength(40);
    expect(inexact).toContain(0.01);
    expect(weightsFor(10, false)).toEqual({ stable: 90, canary: 10 });
    expect(weightsFor(0.5, false)).toEqual({ stable: 995, canary: 5 });
    expect(weightsFor(0, false)).toEqual({ stable: 100, canary: 0 });
    expect(weightsFor(37, true)).toEqual({ stable: 0, canary: 100 });
  });
});

describe('albWeights on moto ELBv2', () => {
  const made: AlbOnMoto[] = [];
  afterEach(async () => {
    for (const alb of made.splice(0)) await alb.delete();
  });

  async function alb(): Promise<AlbOnMoto> {
    const a = await createAlb(moto!);
    made.push(a);
    return a;
  }
  function actuatorOn(a: AlbOnMoto, over: Partial<AlbWeightsTarget> = {}): AlbWeightsActuator {
    const config: AlbWeightsTarget = {
      type: 'albWeights',
      ruleArn: a.ruleArn,
      stableTargetGroupArn: a.stable,
      canaryTargetGroupArn: a.canary,
      region: ALB_REGION,
      ...over,
    };
    return new AlbWeightsActuator('web-alb', config, a.client);
  }
  async function rule(a: AlbOnMoto): Promise<Rule> {
    return (await a.client.send(new DescribeRulesCommand({ RuleArns: [a.ruleArn] }))).Rules![0]!;
  }
  async function weights(a: AlbOnMoto): Promise<Record<string, number>> {
    const groups = (await rule(a)).Actions!.find((x) => x.Type === 'forward')!.ForwardConfig!.TargetGroups!;
    return Object.fromEntries(
      groups.map((g) => [g.TargetGroupArn === a.stable ? 'stable' : g.TargetGroupArn === a.canary ? 'canary' : g.TargetGroupArn!, g.Weight!]),
    );
  }
  async function tag(a: AlbOnMoto, arn = a.ruleArn): Promise<string | undefined> {
    const res = await a.client.send(new DescribeTagsCommand({ ResourceArns: [arn] }));
    return res.TagDescriptions?.[0]?.Tags?.find((t) => t.Key === STAMP_TAG)?.Value;
  }
  /** Read, then write on that reading, as the caller does. */
  async function step(actuator: AlbWeightsActuator, stamp: Stamp): Promise<Observed> {
    return actuator.write(desiredOf(stamp), stamp, await actuator.read('canary'));
  }

  it('a rule at rest: 0 %, no stamp, no split but ours', async () => {
    const a = await alb();
    const observed = await actuatorOn(a).read('canary');
    expect(observed).toMatchObject({ percent: 0, final: false, stamp: null });
    expect(observed.foreignSplit).toBeUndefined();
    expect(observed.detail).toMatch(/^rule …\/[0-9a-f]+: stable 100, canary 0 \(0%\)$/);
  });

  it('10 % → 50 % → final, each read back with the stamp tag', async () => {
    const a = await alb();
    const actuator = actuatorOn(a);
    for (const [stamp, expected] of [
      [stampOf(1, 10), { stable: 90, canary: 10 }],
      [stampOf(1, 50, { stage: 1 }), { stable: 50, canary: 50 }],
      [stampOf(1, 100, { stage: 1, final: true }), { stable: 0, canary: 100 }],
    ] as const) {
      const back = await step(actuator, stamp);
      expect(back).toMatchObject({ percent: stamp.percent, final: stamp.final, stamp });
      expect(await actuator.read('canary')).toEqual(back);
      expect(await weights(a)).toEqual(expected);
      expect(await tag(a)).toBe(stampText(stamp));
    }
  });

  it('two-decimal percents read back as written; the weights say the same within 0.09', async () => {
    const a = await alb();
    const actuator = actuatorOn(a);
    for (const p of [12.34, 33.33, 0.5, 99.9, 14.28, 0.01, 99.99]) {
      const back = await step(actuator, stampOf(2, p));
      expect(back.percent).toBe(p);
      expect(back.final).toBe(false);
      const w = await weights(a);
      expect(w.stable! >= 1 && w.stable! <= MAX_WEIGHT && w.canary! >= 1 && w.canary! <= MAX_WEIGHT).toBe(true);
      expect(Math.abs((await rulePercent(a.client, a.ruleArn, a.canary)) - p)).toBeLessThanOrEqual(0.09 + 1e-9);
    }
    // 99.99 %: a split keeps 1 in 1000 on stable (only final sends everything to the canary).
    expect(await weights(a)).toEqual({ stable: 1, canary: 999 });
  });

  it('a rollback to 0 puts everything back on stable, stamped with no stage', async () => {
    const a = await alb();
    const actuator = actuatorOn(a);
    await step(actuator, stampOf(1, 30));
    const back = await step(actuator, stampOf(1, 0, { stage: null }));
    expect(back).toMatchObject({ percent: 0, final: false, stamp: { stage: null, percent: 0 } });
    expect(await weights(a)).toEqual({ stable: 100, canary: 0 });
  });

  it('a stamp with a higher epoch than ours: TargetMovedError, the rule and its tag as they were', async () => {
    const a = await alb();
    const actuator = actuatorOn(a);
    const theirs = stampOf(5, 20);
    await step(actuator, theirs);
    const observed = await actuator.read('canary');
    const ours = stampOf(4, 60);
    const moved = actuator.write(desiredOf(ours), ours, observed);
    await expect(moved).rejects.toThrow(TargetMovedError);
    await expect(moved).rejects.toThrow(/epoch 5, ours is 4/);
    expect(await weights(a)).toEqual({ stable: 80, canary: 20 });
    expect(await tag(a)).toBe(stampText(theirs));
  });

  it('a change made after the reading: TargetMovedError, the change kept for the caller to see', async () => {
    const a = await alb();
    const actuator = actuatorOn(a);
    const observed = await actuator.read('canary');
    await tamperRule(a, 40);
    const stamp = stampOf(1, 10);
    await expect(actuator.write(desiredOf(stamp), stamp, observed)).rejects.toThrow(/read as .*canary 0 \(0%\), now .*canary 40 \(40%\)/);
    expect(await weights(a)).toEqual({ stable: 60, canary: 40 });
    expect(await tag(a)).toBeUndefined();
  });

  it('the fixture: setup at rest, an outside edit seen against our stamp, close', async () => {
    const under = await albWeightsFixture(moto).setup();
    const { actuator, newVersion } = under;
    try {
      expect(await actuator.read(newVersion)).toMatchObject({ percent: 0, final: false, stamp: null });
      const stamp = stampOf(3, 10);
      await actuator.write(desiredOf(stamp), stamp, await actuator.read(newVersion));
      expect(await under.measuredPercent?.()).toBe(10);
      await under.tamper(35);
      expect(await actuator.read(newVersion)).toMatchObject({ percent: 35, final: false, stamp });
      expect(await under.measuredPercent?.()).toBe(35);
    } finally {
      await under.close();
    }
  });

  it("a listener's default action: weighted and stamped on the listener, the rule untouched", async () => {
    const a = await alb();
    const actuator = actuatorOn(a, { ruleArn: undefined, listenerArn: a.listenerArn });
    expect((await actuator.read('canary')).detail).toMatch(/^listener …\/[0-9a-f]+ default action: stable 100, canary 0/);
    const stamp = stampOf(1, 25);
    const back = await step(actuator, stamp);
    expect(back).toMatchObject({ percent: 25, final: false, stamp });
    const listener = (await a.client.send(new DescribeListenersCommand({ ListenerArns: [a.listenerArn] }))).Listeners![0]!;
    expect(listener.DefaultActions![0]!.ForwardConfig!.TargetGroups!.map((g) => [g.TargetGroupArn, g.Weight])).toEqual([
      [a.stable, 75],
      [a.canary, 25],
    ]);
    expect(await tag(a, a.listenerArn)).toBe(stampText(stamp));
    expect(await weights(a)).toEqual({ stable: 100, canary: 0 });
    expect(await tag(a)).toBeUndefined();
  });

  it("the target's stickiness is written with every split, and the rule's conditions are kept", async () => {
    const a = await alb();
    const actuator = actuatorOn(a, { stickinessSeconds: 300 });
    const conditions = (await rule(a)).Conditions;
    for (const p of [10, 50]) {
      const back = await step(actuator, stampOf(1, p));
      expect(back.detail).toMatch(new RegExp(`: stable ${100 - p}, canary ${p} \\(${p}%\\), sticky 300 s$`));
      const r = await rule(a);
      expect(r.Actions![0]!.ForwardConfig!.TargetGroupStickinessConfig).toEqual({ Enabled: true, DurationSeconds: 300 });
      expect(r.Conditions).toEqual(conditions);
      expect(r.Priority).toBe('10');
    }
  });

  // moto liberty: AWS takes authenticate actions on HTTPS listeners only, and never describes a client secret.
  it('an authentication action before the forward is kept, its client secret left in place', async () => {
    const a = await alb();
    const oidc = {
      Issuer: 'https://idp.example',
      AuthorizationEndpoint: 'https://idp.example/authorize',
      TokenEndpoint: 'https://idp.example/token',
      UserInfoEndpoint: 'https://idp.example/userinfo',
      ClientId: 'web',
    };
    await a.client.send(
      new ModifyRuleCommand({
        RuleArn: a.ruleArn,
        Actions: [
          { Type: 'authenticate-oidc', Order: 1, AuthenticateOidcConfig: { ...oidc, ClientSecret: 'secret' } },
          {
            ...forwardAction([
              [a.stable, 100],
              [a.canary, 0],
            ]),
            Order: 2,
          },
        ],
      }),
    );
    await step(actuatorOn(a), stampOf(1, 10));
    const actions = (await rule(a)).Actions!;
    expect(actions.map((x) => [x.Type, x.Order])).toEqual([
      ['authenticate-oidc', 1],
      ['forward', 2],
    ]);
    expect(actions[0]!.AuthenticateOidcConfig).toEqual({ ...oidc, UseExistingClientSecret: true });
    expect(await weights(a)).toEqual({ stable: 90, canary: 10 });
  });

  it('a forward to a third target group is a foreign split', async () => {
    const a = await alb();
    const other = await a.targetGroup('other');
    await a.client.send(
      new ModifyRuleCommand({
        RuleArn: a.ruleArn,
        Actions: [
          forwardAction([
            [a.stable, 80],
            [a.canary, 10],
            [other, 10],
          ]),
        ],
      }),
    );
    const observed = await actuatorOn(a).read('canary');
    expect(observed.percent).toBe(10);
    expect(observed.foreignSplit).toMatch(/also forwards to alb-[0-9a-f]+-other \(weight 10\)/);
  });

  it('a rule that does not forward: a foreign split, and a write is refused with the rule unchanged', async () => {
    const a = await alb();
    await a.client.send(
      new ModifyRuleCommand({
        RuleArn: a.ruleArn,
        Actions: [{ Type: 'fixed-response', FixedResponseConfig: { StatusCode: '503', ContentType: 'text/plain' } }],
      }),
    );
    const actuator = actuatorOn(a);
    const observed = await actuator.read('canary');
    expect(observed).toMatchObject({ percent: 0, final: false, stamp: null });
    expect(observed.foreignSplit).toMatch(/fixed-response, no forward/);
    const stamp = stampOf(1, 10);
    await expect(actuator.write(desiredOf(stamp), stamp, observed)).rejects.toThrow(TargetRefusedError);
    expect((await rule(a)).Actions!.map((x) => x.Type)).toEqual(['fixed-response']);
    expect(await tag(a)).toBeUndefined();
  });

  it('what ELBv2 refuses (a target group that does not exist) is TargetRefusedError, and nothing changed', async () => {
    const a = await alb();
    await a.client.send(new ModifyRuleCommand({ RuleArn: a.ruleArn, Actions: [forwardAction([[a.stable, 100]])] }));
    const missing = a.canary.replace(/\/[0-9a-f]+$/, '/0000000000000000');
    const actuator = actuatorOn(a, { canaryTargetGroupArn: missing });
    const observed = await actuator.read('canary');
    expect(observed).toMatchObject({ percent: 0, final: false, stamp: null });
    const stamp = stampOf(1, 10);
    const refused = await actuator.write(desiredOf(stamp), stamp, observed).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TargetRefusedError);
    expect((refused as Error).message).toMatch(/TargetGroupNotFound/);
    expect(await weights(a)).toEqual({ stable: 100 });
    expect(await tag(a)).toBeUndefined();
  });

  async function tamperRule(a: AlbOnMoto, percent: number): Promise<void> {
    await a.client.send(
      new ModifyRuleCommand({
        RuleArn: a.ruleArn,
        Actions: [
          forwardAction([
            [a.stable, 100 - percent],
            [a.canary, percent],
          ]),
        ],
      }),
    );
  }
});
