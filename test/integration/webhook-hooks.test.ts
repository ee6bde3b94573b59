/**
 * Hooks as gates, over a real store and a real HTTP receiver: what we send
 * (the rollout, attempt, stage, leader's epoch, versions, an idempotency key,
 * a body signed with the operator's HMAC secret, verified here as a receiver
 * would), and what each answer does to the rollout.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { OutboundHttp } from '../../shared/adapters/http/outbound.js';
import { WebhookProvider, type HookPayload } from '../../shared/adapters/http/webhook.js';
import { rolloutSamples } from '../../shared/api/metrics.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import { OperatorSecrets } from '../../shared/outbound/secrets.js';
import { Actuation, POST_ROLLOUT } from '../../shared/actuation/reconcile.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { GateReader } from '../../shared/rollout/gate-reader.js';
import { BatchPromoter } from '../../shared/rollout/promoters.js';
import { outboundIssues, parseRolloutSpec } from '../../shared/rollout/spec.js';
import { openBackend, type LeaseBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const SECRET = 'a-hook-secret-of-at-least-32-characters!!';
const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

describe('hooks (webhook gates) on PostgreSQL', () => {
  let backend: LeaseBackend;
  let receiver: Server;
  let url: string;
  /** What the receiver answers, by hook. */
  const answer: Record<string, number> = {};
  const received: { payload: HookPayload; headers: Record<string, string | string[] | undefined>; verified: boolean }[] = [];

  beforeAll(async () => {
    backend = await openBackend('postgres');
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        // As a receiver checks it: k=<key id>,t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>.
        const sig = Object.fromEntries(
          String(req.headers['rollout-signature'] ?? '')
            .split(',')
            .map((p) => p.split('=') as [string, string]),
        );
        const expected = createHmac('sha256', SECRET).update(`${sig.t}.${body}`).digest();
        const verified = sig.k === 'deploy-bot' && sig.v1 !== undefined && timingSafeEqual(expected, Buffer.from(sig.v1, 'hex'));
        const payload = JSON.parse(body) as HookPayload;
        received.push({ payload, headers: req.headers, verified });
        res.writeHead(answer[payload.hook] ?? 500);
        res.end(`answered for ${payload.hook}`);
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => receiver?.close(r));
    await backend?.close();
  });
  beforeEach(() => {
    received.length = 0;
  });

  const policy = () =>
    new OutboundPolicy({ origins: [url], credentials: { 'hook-key': { type: 'hmac', origin: url, keyId: 'deploy-bot', secret: { env: 'HOOK_SECRET' } } } });
  const spec = (hooks: object[]) => ({
    target: { service: 'checkout', version: 'v2', stableVersion: 'v1', labels: { team: 'payments' } },
    stages: [
      { name: 'canary', percent: 10, bakeSeconds: 60, gates: { providers: hooks } },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
  });
  const hook = (kind: string, o: object = {}) => ({
    type: 'webhook',
    name: kind,
    hook: kind,
    url: `${url}/${kind}`,
    credential: 'hook-key',
    intervalSeconds: 10,
    ...o,
  });

  function promoter() {
    const clock = new ManualClock();
    const provider = new WebhookProvider({
      outbound: new OutboundHttp(policy()),
      secrets: new OperatorSecrets({ env: { HOOK_SECRET: SECRET } }),
      now: () => clock.now(),
    });
    // No targets: the actuation only sends post-rollout hooks.
    const engine = new RolloutEngine({
      store: backend.rollouts,
      bus: new InProcessBus(),
      clock,
      actuation: new Actuation(backend.rollouts, new Map(), clock, undefined, provider),
    });
    const elector = new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'hooks', clock, ...LEASE });
    const batch = new BatchPromoter(engine, campaignEachTime(elector), { reader: new GateReader({ webhook: provider }, backend.rollouts, { clock }) });
    return { clock, engine, batch, elector };
  }

  it('confirm-promotion: a 2xx lets the stage promote once its bake is over; what was sent names the rollout, stage, epoch and versions, signed', async () => {
    answer['confirm-promotion'] = 200;
    const p = promoter();
    const { id } = await createRollout(p.engine, { spec: spec([hook('confirm-promotion', { metadata: { ticket: 'CHG-1' } })]), actor: 'alice' });
    await p.batch.tick(); // activates the canary
    await p.batch.tick(); // reads the hook: passes, but the bake is not over
    expect((await backend.rollouts.load(id))!.stages[0]!.phase).toBe('active');
    p.clock.advance(60_000);
    await p.batch.tick();
    // The last stage has no bake and no gate: it completes in the same evaluation.
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('completed');
    const first = received[0]!;
    expect(first.verified).toBe(true);
    expect(first.payload).toMatchObject({
      hook: 'confirm-promotion',
      gate: 'confirm-promotion',
      rolloutId: id,
      attempt: 1,
      stage: { index: 0, name: 'canary', percent: 10 },
      epoch: p.elector.token()!.epoch,
      service: 'checkout',
      newVersion: 'v2',
      stableVersion: 'v1',
      labels: { team: 'payments' },
      metadata: { ticket: 'CHG-1' },
      idempotencyKey: `${id}:1:0:confirm-promotion`,
    });
    expect(first.headers['idempotency-key']).toBe(`${id}:1:0:confirm-promotion`);
    // The secret itself never travels, and no reading keeps it.
    expect(JSON.stringify(received)).not.toContain(SECRET);
    expect(JSON.stringify(await backend.rollouts.gateReadings(id))).not.toContain(SECRET);
  });

  it('confirm-promotion: a 4xx is a refusal counted against failureLimit; past it the stage rolls back', async () => {
    answer['confirm-promotion'] = 409;
    const p = promoter();
    const { id } = await createRollout(p.engine, { spec: spec([hook('confirm-promotion', { failureLimit: 1 })]), actor: 'alice' });
    await p.batch.tick();
    await p.batch.tick();
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('running');
    p.clock.advance(10_000);
    await p.batch.tick();
    const view = (await backend.rollouts.load(id))!;
    expect(view.rollout).toMatchObject({ state: 'rolled_back', stateReason: expect.stringMatching(/the confirm-promotion hook refused \(409\)/) as unknown });
  });

  it('rollback: a 2xx rolls the stage back at once; a 4xx (not asked) lets it go on', async () => {
    answer.rollback = 404;
    const p = promoter();
    const { id } = await createRollout(p.engine, { spec: spec([hook('rollback')]), actor: 'alice' });
    await p.batch.tick();
    await p.batch.tick();
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('running');
    answer.rollback = 200;
    p.clock.advance(10_000);
    await p.batch.tick();
    expect((await backend.rollouts.load(id))!.rollout).toMatchObject({
      state: 'rolled_back',
      stateReason: expect.stringMatching(/the rollback hook asked to roll back \(200\)/) as unknown,
    });
  });

  it('a hook that cannot answer (5xx) is inconclusive: past inconclusiveLimit the rollout pauses, never stalls silently', async () => {
    answer['confirm-promotion'] = 503;
    const p = promoter();
    const { id } = await createRollout(p.engine, { spec: spec([hook('confirm-promotion', { inconclusiveLimit: 1 })]), actor: 'alice' });
    await p.batch.tick();
    await p.batch.tick();
    p.clock.advance(10_000);
    await p.batch.tick();
    expect((await backend.rollouts.load(id))!.rollout).toMatchObject({ state: 'paused', stateReason: expect.stringMatching(/inconclusive/) as unknown });
  });

  it('before the first stage: confirm-rollout and pre-rollout hold all traffic until both pass; a refusal past its limit aborts the attempt with nothing moved', async () => {
    answer['confirm-rollout'] = 200;
    answer['pre-rollout'] = 503;
    const p = promoter();
    const before = (o: object = {}) => ({ ...spec([]), hooks: [hook('confirm-rollout'), hook('pre-rollout', { inconclusiveLimit: 5, ...o })] });
    const { id } = await createRollout(p.engine, { spec: before(), actor: 'alice' });
    await p.batch.tick();
    expect((await backend.rollouts.load(id))!.stages[0]!.phase).toBe('pending');
    expect(received.map((r) => [r.payload.hook, r.payload.stage.index, r.payload.idempotencyKey])).toEqual([
      ['confirm-rollout', 0, `${id}:1:0:confirm-rollout`],
      ['pre-rollout', 0, `${id}:1:0:pre-rollout`],
    ]);
    answer['pre-rollout'] = 200;
    p.clock.advance(10_000);
    await p.batch.tick();
    expect((await backend.rollouts.load(id))!.stages[0]!.phase).toBe('active');

    answer['confirm-rollout'] = 403;
    const refused = await createRollout(p.engine, { spec: before(), actor: 'alice' });
    await p.batch.tick();
    const view = (await backend.rollouts.load(refused.id))!;
    expect(view.rollout).toMatchObject({ state: 'aborted', stateReason: expect.stringMatching(/the confirm-rollout hook refused \(403\)/) as unknown });
    expect(view.stages.every((s) => s.activatedAt === null)).toBe(true);
    const aborted = (await backend.rollouts.events(refused.id)).find((e) => e.detailType === 'ai.rollout.aborted')!;
    expect(aborted.detail).toMatchObject({ percent: 0, readings: [expect.objectContaining({ gate: 'confirm-rollout', outcome: 'fail', value: 403 })] });
  });

  it('post-rollout: registered while the rollout runs, sent once it has ended (signed, with its outcome and idempotency key), and never again', async () => {
    answer['post-rollout'] = 204;
    const p = promoter();
    const { id } = await createRollout(p.engine, {
      spec: { ...spec([]), hooks: [hook('post-rollout', { metadata: { channel: 'deploys' } })] },
      actor: 'alice',
    });
    await p.batch.tick(); // activates the canary: the hook is registered, not sent
    expect(received).toEqual([]);
    expect(await backend.rollouts.actuations(id)).toEqual([
      expect.objectContaining({ target: `${POST_ROLLOUT}post-rollout`, kind: 'postRolloutHook', state: 'pending', settled: false }),
    ]);
    expect(await backend.rollouts.unsettledActuations(100)).toContain(id);
    // On /metrics: the hook's target, pending since it was registered, its lag growing with the clock.
    const target = { rollout: id, target: `${POST_ROLLOUT}post-rollout` };
    const [record] = await backend.rollouts.actuations(id);
    const figures = rolloutSamples((await backend.rollouts.load(id))!, [record!], p.clock.now() + 5_000);
    expect(figures.filter((f) => f.name === 'rollout_actuation_state')).toEqual([
      { name: 'rollout_actuation_state', labels: { ...target, kind: 'postRolloutHook', state: 'pending' }, value: 1 },
    ]);
    expect(figures.filter((f) => f.name === 'rollout_actuation_lag_seconds')).toEqual([
      { name: 'rollout_actuation_lag_seconds', labels: target, value: (p.clock.now() + 5_000 - record!.updatedAt) / 1000 },
    ]);
    expect(figures.some((f) => f.name === 'rollout_actuation_drift')).toBe(false);
    p.clock.advance(60_000);
    await p.batch.tick(); // the bake is over: promoted, completed, and the hook sent
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('completed');
    expect(received).toHaveLength(1);
    expect(received[0]!.verified).toBe(true);
    expect(received[0]!.payload).toMatchObject({
      hook: 'post-rollout',
      rolloutId: id,
      attempt: 1,
      stage: { index: 1, name: 'all' },
      outcome: 'completed',
      newVersion: 'v2',
      stableVersion: 'v1',
      metadata: { channel: 'deploys' },
      idempotencyKey: `${id}:1:1:post-rollout`,
    });
    expect(await backend.rollouts.actuations(id)).toEqual([
      expect.objectContaining({ state: 'converged', settled: true, appliedAt: expect.any(Number) as unknown }),
    ]);
    expect(await backend.rollouts.unsettledActuations(100)).not.toContain(id);
    p.clock.advance(60_000);
    await p.batch.tick();
    expect(received).toHaveLength(1);
  });

  it('post-rollout: an end committed by a process that crashed before sending is sent by the next tick, with the outcome aborted', async () => {
    answer['post-rollout'] = 200;
    const p = promoter();
    const { id } = await createRollout(p.engine, { spec: { ...spec([]), hooks: [hook('post-rollout')] }, actor: 'alice' });
    await p.batch.tick();
    // The abort is committed by an engine that carries nothing out (the process that died right after its commit).
    const bare = new RolloutEngine({ store: backend.rollouts, bus: new InProcessBus(), clock: p.clock });
    await runCommand(bare, (await campaignEachTime(p.elector)())!, { rolloutId: id, command: 'abort', actor: 'alice', reason: 'wrong build' });
    expect(received).toEqual([]);
    await p.batch.tick();
    expect(received.map((r) => [r.payload.hook, r.payload.outcome, r.payload.stage.index])).toEqual([['post-rollout', 'aborted', 0]]);
  });

  it('post-rollout: a receiver that cannot answer is tried again each interval; past inconclusiveLimit we give up, recorded, and the rollout is untouched', async () => {
    answer['post-rollout'] = 503;
    const p = promoter();
    const { id } = await createRollout(p.engine, { spec: { ...spec([]), hooks: [hook('post-rollout', { inconclusiveLimit: 1 })] }, actor: 'alice' });
    await p.batch.tick();
    await runCommand(p.engine, (await campaignEachTime(p.elector)())!, { rolloutId: id, command: 'abort', actor: 'alice' });
    expect(received).toHaveLength(1);
    await p.batch.tick(); // within the interval: not sent again
    expect(received).toHaveLength(1);
    p.clock.advance(10_000);
    await p.batch.tick();
    expect(received).toHaveLength(2);
    const [record] = await backend.rollouts.actuations(id);
    expect(record).toMatchObject({
      state: 'failed',
      settled: true,
      tries: { failed: 0, inconclusive: 2 },
      reason: expect.stringMatching(/post-rollout hook post-rollout: HTTP 503 .*given up after 2 tries/) as unknown,
    });
    p.clock.advance(10_000);
    await p.batch.tick();
    expect(received).toHaveLength(2);
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('aborted');
  });

  it("hooks are declared where they are asked: a stage hook among the spec's hooks, or the reverse, is refused naming the field", () => {
    expect(() => parseRolloutSpec({ ...spec([]), hooks: [hook('rollback')] })).toThrow(/hooks\.0\.hook: rollback is a stage's gate/);
    expect(() => parseRolloutSpec(spec([hook('pre-rollout')]))).toThrow(/stages\.0\.gates\.providers\.0\.hook: pre-rollout is asked before the first stage/);
    expect(() => parseRolloutSpec(spec([hook('post-rollout')]))).toThrow(/stages\.0\.gates\.providers\.0\.hook: post-rollout is asked once the rollout ends/);
    expect(() => parseRolloutSpec({ ...spec([hook('confirm-promotion')]), hooks: [hook('confirm-rollout', { name: 'confirm-promotion' })] })).toThrow(
      /hooks\.0\.name: "confirm-promotion" is also a gate of the first stage/,
    );
  });

  it('a spec naming a hook outside the allow-list, or a credential bound elsewhere, is refused naming the field', () => {
    const refused = outboundIssues(parseRolloutSpec(spec([hook('rollback', { url: 'https://hooks.example.com/rollback' })])), policy());
    expect(refused).toEqual([expect.stringMatching(/^stages\.0\.gates\.providers\.0\.url: /) as unknown]);
    const before = outboundIssues(parseRolloutSpec({ ...spec([]), hooks: [hook('pre-rollout', { url: 'https://hooks.example.com/pre' })] }), policy());
    expect(before).toEqual([expect.stringMatching(/^hooks\.0\.url: /) as unknown]);
  });
});
