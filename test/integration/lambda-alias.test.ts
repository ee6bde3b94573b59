/**
 * The `lambdaAlias` actuator against moto, through the unmodified Lambda SDK
 * client. moto keeps functions, versions and aliases with their routing, but
 * its UpdateAlias neither changes nor checks RevisionId and accepts any
 * RoutingConfig; test/support/lambda/revision-proxy.ts adds Lambda's alias
 * rules in front of it. The first part holds the proxy to those rules (and
 * shows moto alone still lacks them), the second the actuator to the port's,
 * the third the check that an alias serves the rollout's stableVersion
 * before its judged gates read that version as the baseline, through the
 * engine on a node's store (PostgreSQL) and the stack's (DynamoDB).
 */
import {
  CreateAliasCommand,
  GetAliasCommand,
  InvalidParameterValueException,
  ListAliasesCommand,
  PreconditionFailedException,
  PublishVersionCommand,
  UpdateAliasCommand,
  UpdateFunctionConfigurationCommand,
  type AliasConfiguration,
  type UpdateAliasCommandInput,
} from '@aws-sdk/client-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import { Actuation } from '../../shared/actuation/reconcile.js';
import { LambdaAliasActuator } from '../../shared/adapters/actuators/lambda-alias/actuator.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { StreamingPromoter } from '../../shared/rollout/promoters.js';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { lambdaVersionIssues } from '../../shared/actuation/targets.js';
import { parseStamp, TargetMovedError, TargetRefusedError, type Desired, type Stamp } from '../../shared/actuation/port.js';
import { LAMBDA_REGION, lambdaAliasFixture, setupLambdaAlias, type LambdaAliasUnderTest } from '../support/actuators/lambda-alias.js';

const moto = process.env.ROLLOUT_MOTO_URL ?? '';
if (!moto) throw new Error('ROLLOUT_MOTO_URL is not set: run through npm test (the harness starts moto)');

const open: LambdaAliasUnderTest[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close();
});
async function fresh(): Promise<LambdaAliasUnderTest> {
  const t = await setupLambdaAlias(moto);
  open.push(t);
  return t;
}

/** The alias as stored, without the request metadata. */
async function aliasOn(t: LambdaAliasUnderTest, via: 'proxy' | 'moto' = 'proxy'): Promise<AliasConfiguration> {
  const { $metadata: _, ...a } = await (via === 'proxy' ? t.viaProxy : t.onMoto).send(new GetAliasCommand({ FunctionName: t.functionName, Name: t.alias }));
  return a;
}
const update = (t: LambdaAliasUnderTest, input: Omit<UpdateAliasCommandInput, 'FunctionName' | 'Name'>) =>
  t.viaProxy.send(new UpdateAliasCommand({ FunctionName: t.functionName, Name: t.alias, ...input }));
const weights = (a: AliasConfiguration) => a.RoutingConfig?.AdditionalVersionWeights ?? {};
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (err: Error & { $metadata?: { httpStatusCode?: number } }) => ({ error: err, status: err.$metadata?.httpStatusCode, message: err.message }),
  );
/** A third published version of the fixture's function. */
async function publishThird(t: LambdaAliasUnderTest): Promise<string> {
  await t.onMoto.send(new UpdateFunctionConfigurationCommand({ FunctionName: t.functionName, Description: 'third' }));
  return (await t.onMoto.send(new PublishVersionCommand({ FunctionName: t.functionName }))).Version!;
}

describe('the RevisionId proxy in front of moto', () => {
  it('refuses an update on a stale RevisionId with PreconditionFailedException, and changes nothing', async () => {
    const t = await fresh();
    const first = await aliasOn(t);
    await update(t, { Description: 'by the first writer', RevisionId: first.RevisionId });
    const after = await aliasOn(t);

    for (const stale of [first.RevisionId!, 'not-a-revision']) {
      const refused = await refusal(
        update(t, { FunctionVersion: '1', RoutingConfig: { AdditionalVersionWeights: { '2': 0.5 } }, Description: 'late', RevisionId: stale }),
      );
      expect(refused?.error).toBeInstanceOf(PreconditionFailedException);
      expect(refused?.status).toBe(412);
      expect(await aliasOn(t)).toEqual(after);
      expect(await aliasOn(t, 'moto')).toMatchObject({ FunctionVersion: '1', Description: 'by the first writer' });
    }
    expect(weights(after)).toEqual({});
  });

  it('lets exactly one of two updates sent together on the same RevisionId through', async () => {
    const t = await fresh();
    const { RevisionId } = await aliasOn(t);
    const outcomes = await Promise.all(
      ['0.2', '0.7'].map((w) =>
        update(t, { RoutingConfig: { AdditionalVersionWeights: { '2': Number(w) } }, Description: `writer ${w}`, RevisionId }).then(
          (a) => ({ won: a }),
          (err: Error) => ({ lost: err }),
        ),
      ),
    );
    const won = outcomes.flatMap((o) => ('won' in o ? [o.won] : []));
    const lost = outcomes.flatMap((o) => ('lost' in o ? [o.lost] : []));
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toBeInstanceOf(PreconditionFailedException);
    expect(await aliasOn(t)).toMatchObject({ Description: won[0]!.Description, RevisionId: won[0]!.RevisionId, RoutingConfig: won[0]!.RoutingConfig });
  });

  it('gives each successful update a new RevisionId, and every read reports the current one', async () => {
    const t = await fresh();
    const seen = [(await aliasOn(t)).RevisionId!];
    const unconditioned = await update(t, { Description: 'one' });
    seen.push(unconditioned.RevisionId!);
    const conditioned = await update(t, { RoutingConfig: { AdditionalVersionWeights: { '2': 0.25 } }, RevisionId: unconditioned.RevisionId });
    seen.push(conditioned.RevisionId!);
    // Lambda renews it even when nothing changes.
    const same = await update(t, { Description: 'one', RevisionId: conditioned.RevisionId });
    seen.push(same.RevisionId!);

    expect(new Set(seen).size).toBe(4);
    expect((await aliasOn(t)).RevisionId).toBe(same.RevisionId);
    const listed = await t.viaProxy.send(new ListAliasesCommand({ FunctionName: t.functionName }));
    expect(listed.Aliases?.map((a) => [a.Name, a.RevisionId])).toEqual([[t.alias, same.RevisionId]]);
    expect(await aliasOn(t)).toMatchObject({ FunctionVersion: '1', Description: 'one', RoutingConfig: { AdditionalVersionWeights: { '2': 0.25 } } });

    const created = await t.viaProxy.send(new CreateAliasCommand({ FunctionName: t.functionName, Name: 'canary', FunctionVersion: '2' }));
    const canary = await t.viaProxy.send(new GetAliasCommand({ FunctionName: t.functionName, Name: 'canary' }));
    expect(canary.RevisionId).toBe(created.RevisionId);
    expect(seen).not.toContain(created.RevisionId);
  });

  it('refuses routing Lambda refuses with InvalidParameterValueException naming the problem, and changes nothing', async () => {
    const t = await fresh();
    const third = await publishThird(t);
    const before = await aliasOn(t);
    const cases: [string, UpdateAliasCommandInput['RoutingConfig'], RegExp][] = [
      [
        'two additional versions',
        { AdditionalVersionWeights: { '2': 0.1, [third]: 0.1 } },
        /Number of items in AdditionalVersionWeights cannot be greater than 1/,
      ],
      ['a weight of 1.5', { AdditionalVersionWeights: { '2': 1.5 } }, /'\{2=1\.5\}'.*less than or equal to 1\.0/],
      ['a negative weight', { AdditionalVersionWeights: { '2': -0.1 } }, /'\{2=-0\.1\}'.*greater than or equal to 0\.0/],
      ['$LATEST as additional version', { AdditionalVersionWeights: { $LATEST: 0.1 } }, /\$LATEST=0\.1.*\[0-9\]\+/],
      ["the alias's own version", { AdditionalVersionWeights: { '1': 0.1 } }, /Function version 1 is already included in routing configuration/],
      ['a version that does not exist', { AdditionalVersionWeights: { '9': 0.1 } }, /Version 9 of function .* does not exist/],
    ];
    for (const [what, routing, message] of cases) {
      const refused = await refusal(update(t, { RoutingConfig: routing, RevisionId: before.RevisionId }));
      expect(refused?.error, what).toBeInstanceOf(InvalidParameterValueException);
      expect(refused?.status, what).toBe(400);
      expect(refused?.message, what).toMatch(message);
    }
    // The alias's own version moved onto the additional one is the same conflict.
    const moved = await refusal(update(t, { FunctionVersion: '2', RoutingConfig: { AdditionalVersionWeights: { '2': 0.1 } } }));
    expect(moved?.message).toMatch(/Function version 2 is already included/);
    const latest = await refusal(
      t.viaProxy.send(
        new CreateAliasCommand({
          FunctionName: t.functionName,
          Name: 'edge',
          FunctionVersion: '$LATEST',
          RoutingConfig: { AdditionalVersionWeights: { '2': 0.1 } },
        }),
      ),
    );
    expect(latest?.error).toBeInstanceOf(InvalidParameterValueException);
    expect(latest?.message).toMatch(/\$LATEST is not supported for an alias pointing to more than 1 version/);

    expect(await aliasOn(t)).toEqual(before);
    // One additional version, a weight of 0 or 1, is Lambda's to accept.
    expect(weights(await update(t, { RoutingConfig: { AdditionalVersionWeights: { [third]: 1 } }, RevisionId: before.RevisionId }))).toEqual({ [third]: 1 });
  });

  it('is needed: moto alone neither checks nor changes RevisionId, and takes any routing', async () => {
    const t = await fresh();
    const first = await aliasOn(t, 'moto');
    const direct = (input: Omit<UpdateAliasCommandInput, 'FunctionName' | 'Name'>) =>
      t.onMoto.send(new UpdateAliasCommand({ FunctionName: t.functionName, Name: t.alias, ...input }));
    const stale = await direct({ Description: 'stale writer', RevisionId: 'not-a-revision' });
    const tooMuch = await direct({ RoutingConfig: { AdditionalVersionWeights: { '2': 1.5, $LATEST: 0.2 } } });
    expect([stale.RevisionId, tooMuch.RevisionId]).toEqual([first.RevisionId, first.RevisionId]);
    expect(weights(tooMuch)).toEqual({ '2': 1.5, $LATEST: 0.2 });
  });
});

describe('the lambdaAlias actuator on moto, through the proxy', () => {
  const ROLLOUT = 'r-0193';
  const desired = (percent: number, o: { final?: boolean; stage?: number | null; rolloutId?: string; newVersion?: string } = {}): Desired => ({
    rolloutId: o.rolloutId ?? ROLLOUT,
    attempt: 1,
    stage: o.stage === undefined ? 0 : o.stage,
    percent,
    final: o.final ?? false,
    newVersion: o.newVersion ?? '2',
    version: 1,
  });
  const stampOf = (d: Desired, epoch = 3): Stamp => ({ rolloutId: d.rolloutId, attempt: d.attempt, stage: d.stage, epoch, percent: d.percent, final: d.final });

  it('reads an alias never written by us: all on its version, no stamp', async () => {
    const t = await fresh();
    const o = await t.actuator.read('2');
    expect(o).toMatchObject({ percent: 0, final: false, stamp: null });
    expect(o.foreignSplit).toBeUndefined();
    expect(o.revision).toBe((await aliasOn(t)).RevisionId);
    expect(o.detail).toBe(`alias live → 1, revision ${o.revision}`);
    expect(t.actuator).toMatchObject({ kind: 'lambdaAlias', target: t.functionName });
    expect(lambdaAliasFixture(moto).kind).toBe('lambdaAlias');
  });

  it('moves 10 %, then 50 %, then finalises on the new version, each read back', async () => {
    const t = await fresh();
    const o0 = await t.actuator.read('2');

    const d1 = desired(10);
    const o1 = await t.actuator.write(d1, stampOf(d1), o0);
    expect(o1).toMatchObject({ percent: 10, final: false, stamp: { ...stampOf(d1), base: '1' } });
    expect(o1.revision).not.toBe(o0.revision);
    expect(o1.detail).toBe(`alias live → 1, 10% on 2, revision ${o1.revision}`);
    expect(await aliasOn(t, 'moto')).toMatchObject({ FunctionVersion: '1', RoutingConfig: { AdditionalVersionWeights: { '2': 0.1 } } });
    expect(await t.measuredPercent()).toBe(10);

    const d2 = desired(50, { stage: 1 });
    const o2 = await t.actuator.write(d2, stampOf(d2), o1);
    expect(o2).toMatchObject({ percent: 50, final: false, stamp: { ...stampOf(d2), base: '1' } });
    expect(weights(await aliasOn(t))).toEqual({ '2': 0.5 });

    const d3 = desired(100, { stage: 1, final: true });
    const o3 = await t.actuator.write(d3, stampOf(d3), o2);
    expect(o3).toMatchObject({ percent: 0, final: true, stamp: { ...stampOf(d3), final: true, base: '1' } });
    expect(o3.foreignSplit).toBeUndefined();
    const done = await aliasOn(t);
    expect(done.FunctionVersion).toBe('2');
    expect(weights(done)).toEqual({});
    expect(await t.measuredPercent()).toBe(100);
    expect(await t.actuator.read('2')).toEqual(o3);
  });

  it('rolls back to the base version in its stamp, from a split and from a finalised alias', async () => {
    const t = await fresh();
    const d1 = desired(50);
    const split = await t.actuator.write(d1, stampOf(d1), await t.actuator.read('2'));
    const back = desired(0, { stage: null });
    const rolledBack = await t.actuator.write(back, stampOf(back), split);
    expect(rolledBack).toMatchObject({ percent: 0, final: false, stamp: { ...stampOf(back), base: '1' } });
    expect(await aliasOn(t)).toMatchObject({ FunctionVersion: '1' });
    expect(weights(await aliasOn(t))).toEqual({});

    // Once finalised the alias names the new version only: the stable one is known from the stamp alone.
    const fin = desired(100, { final: true });
    const finalised = await t.actuator.write(fin, stampOf(fin), rolledBack);
    expect((await aliasOn(t)).FunctionVersion).toBe('2');
    const undo = await t.actuator.write(back, stampOf(back, 4), finalised);
    expect(undo).toMatchObject({ percent: 0, final: false, stamp: { ...stampOf(back, 4), base: '1' } });
    expect((await aliasOn(t)).FunctionVersion).toBe('1');
    expect(weights(await aliasOn(t))).toEqual({});
  });

  it("takes another rollout's base from the alias as found, not from that rollout's stamp", async () => {
    const t = await fresh();
    const a = desired(100, { final: true });
    const finalised = await t.actuator.write(a, stampOf(a), await t.actuator.read('2'));
    const third = await publishThird(t);

    const b = desired(20, { rolloutId: 'r-0194', newVersion: third });
    const seen = await t.actuator.read(third);
    expect(seen.revision).toBe(finalised.revision);
    const o = await t.actuator.write(b, stampOf(b), seen);
    expect(o).toMatchObject({ percent: 20, final: false, stamp: { ...stampOf(b), base: '2' } });
    expect(await aliasOn(t)).toMatchObject({ FunctionVersion: '2', RoutingConfig: { AdditionalVersionWeights: { [third]: 0.2 } } });
  });

  it('throws TargetMovedError on a stale reading, and leaves the alias as the other writer left it', async () => {
    const t = await fresh();
    const mine = await t.actuator.read('2');
    await t.tamper(30);
    const theirs = await aliasOn(t);
    expect(weights(theirs)).toEqual({ '2': 0.3 });

    const d = desired(10);
    await expect(t.actuator.write(d, stampOf(d), mine)).rejects.toBeInstanceOf(TargetMovedError);
    expect(await aliasOn(t)).toEqual(theirs);
    expect(await t.actuator.read('2')).toMatchObject({ percent: 30, stamp: null, revision: theirs.RevisionId });

    // Two leaders on one reading of an alias we stamped: the first write wins, and Lambda refuses the
    // second, conditioned on the same RevisionId.
    const reading = await t.actuator.write(d, stampOf(d), await t.actuator.read('2'));
    const d2 = desired(50, { stage: 1 });
    const won = await t.actuator.write(d2, stampOf(d2, 5), reading);
    const lost = await t.actuator.write(d, stampOf(d, 4), reading).catch((err: unknown) => err);
    expect(lost).toBeInstanceOf(TargetMovedError);
    expect((lost as Error).message).toMatch(/Revision Id provided does not match the latest Revision Id/);
    expect(await t.actuator.read('2')).toEqual(won);
    expect(won.stamp).toMatchObject({ epoch: 5, percent: 50 });
  });

  it('a tampered weight keeps our stamp, and is read as the alias now carries it', async () => {
    const t = await fresh();
    const d = desired(10);
    await t.actuator.write(d, stampOf(d), await t.actuator.read('2'));
    await t.tamper(40);
    const o = await t.actuator.read('2');
    expect(o).toMatchObject({ percent: 40, final: false, stamp: { ...stampOf(d), base: '1' } });
    expect(o.stamp?.percent).not.toBe(o.percent);
  });

  it('round-trips the stamp through the alias description, with 2-decimal percents exact', async () => {
    const t = await fresh();
    const d = { ...desired(12.34), stage: 2, attempt: 3 };
    const stamp: Stamp = { ...stampOf(d, 17), base: 'ignored: the actuator sets it' };
    const o = await t.actuator.write(d, stamp, await t.actuator.read('2'));
    const expected = { ...stamp, base: '1' };
    expect(o.stamp).toEqual(expected);
    expect(o.percent).toBe(12.34);
    const stored = await aliasOn(t, 'moto');
    expect(weights(stored)).toEqual({ '2': 0.1234 });
    expect(parseStamp(stored.Description)).toEqual(expected);

    for (const p of [0.01, 33.33, 99.99, 5.5, 100]) {
      const dp = desired(p);
      expect((await t.actuator.write(dp, stampOf(dp), await t.actuator.read('2'))).percent).toBe(p);
    }

    // A description someone else wrote is no stamp.
    await update(t, { Description: 'blue/green by hand', RevisionId: (await aliasOn(t)).RevisionId });
    expect((await t.actuator.read('2')).stamp).toBeNull();
  });

  it('reports a split towards another version as foreign', async () => {
    const t = await fresh();
    await t.tamper(10);
    const o = await t.actuator.read('3');
    expect(o).toMatchObject({ percent: 0, final: false });
    expect(o.foreignSplit).toBe('alias live → 1 sends 10% on version 2');
    expect(o.detail).toBe(`alias live → 1, 10% on 2, revision ${o.revision}`);
  });

  it('turns what Lambda refuses into TargetRefusedError, changing nothing', async () => {
    const t = await fresh();
    const before = await aliasOn(t);
    const reading = await t.actuator.read('9');
    const missing = desired(10, { newVersion: '9' });
    const refused = await t.actuator.write(missing, stampOf(missing), reading).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(TargetRefusedError);
    expect((refused as Error).message).toMatch(/Version 9 of function/);

    const latest = desired(10, { newVersion: '$LATEST' });
    await expect(t.actuator.write(latest, stampOf(latest), reading)).rejects.toBeInstanceOf(TargetRefusedError);
    expect(await aliasOn(t)).toEqual(before);
  });

  it('validates a new version at rollout creation: a published version is digits only', () => {
    expect(lambdaVersionIssues('2')).toEqual([]);
    expect(lambdaVersionIssues('1024')).toEqual([]);
    for (const bad of ['$LATEST', '$latest', 'live', '', '01', '2.1', '-1', '3 ']) expect(lambdaVersionIssues(bad), bad).toHaveLength(1);
    expect(lambdaVersionIssues('$LATEST')[0]).toMatch(/\$LATEST is not a published version/);
  });
});

forEachBackend('a rollout on a Lambda alias whose judged gates read stableVersion as the baseline, on %s', { only: ['postgres', 'dynamodb'] }, (backend) => {
  const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
  /** The engine as a node or the stack's promoters run it, moving the fixture's alias as target `live`. */
  function promoter(t: LambdaAliasUnderTest) {
    const clock = new ManualClock();
    const elector = new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE });
    const actuator = new LambdaAliasActuator('live', { type: 'lambdaAlias', functionName: t.functionName, alias: t.alias, region: LAMBDA_REGION }, t.viaProxy);
    const engine = new RolloutEngine({
      store: backend.rollouts,
      bus: new InProcessBus(),
      clock,
      actuation: new Actuation(backend.rollouts, new Map([['live', actuator]]), clock),
    });
    const leadership = campaignEachTime(elector);
    return { engine, streaming: new StreamingPromoter(engine, leadership), token: async () => (await leadership())! };
  }
  const latency = (dimension: string) => ({
    type: 'cloudwatchMetric',
    name: 'latency',
    metric: { namespace: 'AWS/Lambda', metricName: 'Duration', stat: 'Average', dimensions: { FunctionName: 'api', ExecutedVersion: dimension } },
    judge: { kind: 'mann-whitney', direction: 'increase' },
  });
  const threshold = {
    type: 'cloudwatchMetric',
    name: 'latency',
    metric: { namespace: 'AWS/Lambda', metricName: 'Duration', stat: 'Average', dimensions: { FunctionName: 'api', ExecutedVersion: '{{version}}' } },
    comparison: '<',
    threshold: 800,
  };
  const spec = (stableVersion: string, gate: object, where: 'stage' | 'rolloutGates' = 'stage') => ({
    target: { service: 'api', version: '2', stableVersion },
    actuators: ['live'],
    stages: [
      { name: 'canary', percent: 10, bakeSeconds: 600, ...(where === 'stage' ? { gates: { providers: [gate] } } : {}) },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
    ...(where === 'rolloutGates' ? { rolloutGates: { providers: [{ ...gate, dryRun: true }] } } : {}),
  });
  async function started(t: LambdaAliasUnderTest, s: object) {
    const p = promoter(t);
    const { id } = await createRollout(p.engine, { spec: s, actor: 'alice' });
    await p.streaming.handle({ type: 'rollout.created', rolloutId: id });
    return { ...p, id, view: (await backend.rollouts.load(id))!, records: await backend.rollouts.actuations(id) };
  }

  it('pauses before the alias first moves when it serves another version than stableVersion, naming both; nothing is written to it', async () => {
    const t = await fresh();
    const before = await aliasOn(t);
    const { view, records } = await started(t, spec('3', latency('{{version}}')));
    expect(view.rollout.state).toBe('paused');
    expect(view.rollout.stateReason).toBe(
      "actuation drift on live (lambdaAlias): it serves version 1, but the rollout's stableVersion is 3, the baseline its judged gates read by {{version}}; " +
        `nothing was moved. Put the target back on 3 and resume, or abort and create the rollout again with stableVersion 1: alias live → 1, revision ${before.RevisionId}`,
    );
    expect(records).toEqual([expect.objectContaining({ target: 'live', state: 'drift' })]);
    expect(await aliasOn(t)).toEqual(before);
  });

  it('a dry-run judged gate of the whole rollout counts too', async () => {
    const t = await fresh();
    const before = await aliasOn(t);
    const { view } = await started(t, spec('3', latency('{{version}}'), 'rolloutGates'));
    expect(view.rollout.state).toBe('paused');
    expect(view.rollout.stateReason).toMatch(/it serves version 1, but the rollout's stableVersion is 3/);
    expect(await aliasOn(t)).toEqual(before);
  });

  it('moves an alias that serves stableVersion, as before', async () => {
    const t = await fresh();
    const { view } = await started(t, spec('1', latency('{{version}}')));
    expect(view.rollout.state).toBe('running');
    expect(await aliasOn(t)).toMatchObject({ FunctionVersion: '1', RoutingConfig: { AdditionalVersionWeights: { '2': 0.1 } } });
  });

  it('leaves a spec whose gates do not read the baseline by {{version}} as it was: the alias moves from the version it serves', async () => {
    for (const gate of [threshold, latency('{{cohort}}')]) {
      const t = await fresh();
      const { view } = await started(t, spec('3', gate));
      expect(view.rollout.state).toBe('running');
      expect(await aliasOn(t)).toMatchObject({ FunctionVersion: '1', RoutingConfig: { AdditionalVersionWeights: { '2': 0.1 } } });
    }
  });

  it('once the alias is put back on stableVersion, a resume moves it from there', async () => {
    const t = await fresh();
    const third = await publishThird(t);
    const { engine, id, token } = await started(t, spec(third, latency('{{version}}')));
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('paused');
    // The operator puts the alias back on the version the gates judge against, then resumes.
    await update(t, { FunctionVersion: third, RevisionId: (await aliasOn(t)).RevisionId });
    await runCommand(engine, await token(), { rolloutId: id, command: 'resume', actor: 'alice' });
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('running');
    expect(await aliasOn(t)).toMatchObject({ FunctionVersion: third, RoutingConfig: { AdditionalVersionWeights: { '2': 0.1 } } });
    expect(parseStamp((await aliasOn(t)).Description)).toMatchObject({ rolloutId: id, percent: 10, base: third });
  });
});
