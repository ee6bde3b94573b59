/**
 * Spans a user's OpenTelemetry setup sees, on PostgreSQL, over real HTTP
 * receivers: a rollout promoted through a webhook gate and moved by a
 * webhook actuator (`rollout.decide`, `rollout.gate.read`,
 * `rollout.actuate`), and a worker running a run's items (`run.item`). With
 * no SDK registered the same work runs as before and no span is made active;
 * with the SDK's in-memory exporter registered, each span carries its
 * correlation attributes, nests under the user's own spans, and fails where
 * the work failed.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { diag, DiagLogLevel, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Actuation } from '../../shared/actuation/reconcile.js';
import { OutboundHttp } from '../../shared/adapters/http/outbound.js';
import { WebhookActuator } from '../../shared/adapters/actuators/webhook/actuator.js';
import { WebhookProvider } from '../../shared/adapters/http/webhook.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { GateReader } from '../../shared/rollout/gate-reader.js';
import { BatchPromoter, StreamingPromoter } from '../../shared/rollout/promoters.js';
import { createWorker, type WorkHandler } from '../../shared/runtimes/worker/sdk.js';
import { SPAN } from '../../shared/tracing.js';
import { RECEIVER_KEY_ID, RECEIVER_SECRET, receiverSecrets, startWebhookReceiver, type WebhookReceiver } from '../support/actuators/webhook.js';
import { openBackend, uniqueName, type LeaseBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { parentOf, recordSpans, type RecordedSpans } from '../support/tracing.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };

let receiver: WebhookReceiver;
let hooks: Server;
let hookUrl: string;
/** An allow-listed origin where nothing listens: a gate read there cannot be answered. */
let deadUrl: string;

beforeAll(async () => {
  receiver = await startWebhookReceiver({ revisions: true });
  hooks = createServer((req, res) => req.resume().on('end', () => res.writeHead(200).end('confirmed')));
  await new Promise<void>((r) => hooks.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}`;
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
  await new Promise((r) => closed.close(r));
});
afterAll(async () => {
  await receiver?.close();
  await new Promise((r) => hooks?.close(r));
});

const hook = (url: string, name: string) => ({ type: 'webhook', name, hook: 'confirm-promotion', url: `${url}/confirm`, intervalSeconds: 10 });
const spec = (o: { gateUrl: string; gate: string; actuators: string[] }) => ({
  target: { service: 'checkout', version: 'v2', stableVersion: 'v1' },
  actuators: o.actuators,
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 60, gates: { providers: [hook(o.gateUrl, o.gate)] } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
});

/** A leader's promoters over `backend`, reading webhook gates and moving the `flags` target through the webhook actuator. */
function promoter(backend: LeaseBackend, holderId: string, clock = new ManualClock()) {
  const policy = new OutboundPolicy({
    origins: [new URL(receiver.url).origin, hookUrl, deadUrl],
    credentials: { 'split-key': { type: 'hmac', origin: new URL(receiver.url).origin, keyId: RECEIVER_KEY_ID, secret: { env: 'SPLIT_SECRET' } } },
  });
  const outbound = new OutboundHttp(policy);
  const secrets = receiverSecrets();
  const provider = new WebhookProvider({ outbound, secrets, now: () => clock.now() });
  const flags = new WebhookActuator('flags', { type: 'webhook', url: receiver.url, credential: 'split-key', timeoutSeconds: 5 }, { outbound, secrets });
  const engine = new RolloutEngine({
    store: backend.rollouts,
    bus: new InProcessBus(),
    clock,
    actuation: new Actuation(backend.rollouts, new Map([['flags', flags]]), clock, undefined, provider),
  });
  const elector = new LeaseElector(backend.store, { name: 'promotion_leader', holderId, clock, ...LEASE });
  const leadership = campaignEachTime(elector);
  return {
    clock,
    engine,
    elector,
    batch: new BatchPromoter(engine, leadership, { reader: new GateReader({ webhook: provider }, backend.rollouts, { clock }) }),
    streaming: new StreamingPromoter(engine, leadership),
  };
}

/** The target as an operator leaves it between rollouts: all on stable, no stamp. */
function atRest(r: WebhookReceiver): void {
  r.state = { percent: 0, final: false, stamp: null, revision: r.state.revision + 1 };
}

/** A run of `payloads` in the backend's ledger, and the connection string a worker reaches that schema with. */
async function runOf(backend: LeaseBackend, payloads: unknown[]): Promise<{ runId: string; databaseUrl: string }> {
  const runId = uniqueName('run');
  await backend.ledger.createRun(runId, {}, Date.now());
  await backend.ledger.enqueue(runId, payloads, Date.now());
  return { runId, databaseUrl: `${backend.url!}?options=${encodeURIComponent(`-c search_path=${backend.schema!}`)}` };
}

const workerOptions = (databaseUrl: string, runId: string, workerId: string, handler: WorkHandler) => ({
  store: 'postgres' as const,
  databaseUrl,
  runs: [runId],
  workerId,
  instanceId: 'test-host',
  waitSeconds: 1,
  exitWhenDone: true,
  handler,
});

/** A rollout promoted through its gate to the end: activated on its creation event, its gate read on two ticks, completed after the bake. */
async function promoteThrough(p: ReturnType<typeof promoter>, id: string, handle: (run: () => Promise<unknown>) => Promise<unknown> = (run) => run()) {
  await handle(() => p.streaming.handle({ type: 'rollout.created', rolloutId: id }));
  await p.batch.tick(); // reads the gate: it passes, the bake is not over
  p.clock.advance(60_000);
  await p.batch.tick(); // reads it again: promoted, the last stage completes in the same evaluation
}

describe('with no OpenTelemetry SDK registered', () => {
  let backend: LeaseBackend;
  const diagnostics: string[] = [];
  beforeAll(async () => {
    backend = await openBackend('postgres');
    const keep = (...args: unknown[]) => void diagnostics.push(args.map(String).join(' '));
    diag.setLogger({ error: keep, warn: keep, info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.WARN);
  });
  afterAll(async () => {
    diag.disable();
    await backend?.close();
  });

  it('a rollout is promoted and moved, and a worker runs its items, as ever: no span is made active, the API reports nothing', async () => {
    const p = promoter(backend, 'no-sdk');
    const { id } = await createRollout(p.engine, { spec: spec({ gateUrl: hookUrl, gate: 'change-ticket', actuators: ['flags'] }), actor: 'alice' });
    await promoteThrough(p, id);
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('completed');
    expect(receiver.state).toMatchObject({ percent: 100, final: true });

    const { runId, databaseUrl } = await runOf(backend, [{ n: 1 }, { n: 2 }]);
    const active: unknown[] = [];
    const summary = await createWorker(
      workerOptions(databaseUrl, runId, 'no-sdk-worker', (item) => {
        active.push(trace.getActiveSpan());
        return { n: (item.payload as { n: number }).n };
      }),
    ).run();
    expect(summary).toMatchObject({ exit: 'done', done: 2 });
    expect(active).toEqual([undefined, undefined]);
    expect(diagnostics).toEqual([]);
  });
});

describe('with the SDK and an in-memory exporter registered', () => {
  let backend: LeaseBackend;
  let recorded: RecordedSpans;
  beforeAll(() => {
    recorded = recordSpans();
  });
  afterAll(() => recorded?.stop());
  // A store of its own for each case (its leases among them), and the target at rest, as an operator leaves it.
  beforeEach(async () => {
    backend = await openBackend('postgres');
    atRest(receiver);
    recorded.reset();
  });
  afterEach(() => backend?.close());

  const of = (name: string, rolloutId: string) => recorded.spans(name).filter((s) => s.attributes['rollout.id'] === rolloutId);
  const noAddresses = (spans: readonly ReadableSpan[]) => {
    const text = JSON.stringify(spans.map((s) => s.attributes));
    for (const secretOrAddress of [RECEIVER_SECRET, '127.0.0.1', 'http']) expect(text).not.toContain(secretOrAddress);
  };

  it('a promotion: each decision, gate read and target write is a span with its rollout, stage, gate or target, lease epoch and outcome; those of an event handled in a user span are its children', async () => {
    const p = promoter(backend, 'leader-a');
    const { id } = await createRollout(p.engine, { spec: spec({ gateUrl: hookUrl, gate: 'change-ticket', actuators: ['flags'] }), actor: 'alice' });
    const user = trace.getTracer('user-app');
    let request: ReadableSpan['spanContext'] | undefined;
    await promoteThrough(p, id, (run) =>
      user.startActiveSpan('POST /events', async (span) => {
        request = () => span.spanContext();
        await run();
        span.end();
      }),
    );
    expect((await backend.rollouts.load(id))!.rollout.state).toBe('completed');
    const epoch = p.elector.token()!.epoch;

    const decisions = of(SPAN.decide, id);
    expect(decisions.map((s) => s.attributes)).toEqual([
      {
        'rollout.id': id,
        'rollout.attempt': 1,
        'rollout.transition': 'activate',
        'rollout.stage.index': 0,
        'rollout.stage.name': 'canary',
        'rollout.actor': 'promoter:leader-a',
        'lease.epoch': epoch,
        'rollout.outcome': 'applied',
        'rollout.state': 'running',
      },
      {
        'rollout.id': id,
        'rollout.attempt': 1,
        'rollout.transition': 'promote',
        'rollout.stage.index': 0,
        'rollout.stage.name': 'canary',
        'rollout.actor': 'promoter:leader-a',
        'lease.epoch': epoch,
        'rollout.outcome': 'applied',
        'rollout.state': 'running',
      },
      {
        'rollout.id': id,
        'rollout.attempt': 1,
        'rollout.transition': 'promote',
        'rollout.stage.index': 1,
        'rollout.stage.name': 'all',
        'rollout.actor': 'promoter:leader-a',
        'lease.epoch': epoch,
        'rollout.outcome': 'applied',
        'rollout.state': 'completed',
      },
    ]);

    const reads = of(SPAN.gateRead, id);
    expect(reads.map((s) => s.attributes)).toEqual(
      Array.from({ length: 2 }, () => ({
        'rollout.id': id,
        'rollout.attempt': 1,
        'rollout.stage.index': 0,
        'rollout.stage.name': 'canary',
        'rollout.gate.name': 'change-ticket',
        'rollout.gate.type': 'webhook',
        'lease.epoch': epoch,
        'rollout.gate.outcome': 'pass',
        'rollout.gate.value': 200,
      })),
    );

    const writes = of(SPAN.actuate, id);
    const target = {
      'rollout.id': id,
      'rollout.attempt': 1,
      'rollout.target': 'flags',
      'rollout.actuator.kind': 'webhook',
      'lease.epoch': epoch,
      'rollout.actuation.verdict': 'write',
      'rollout.actuation.wrote': true,
    };
    // Written on activation; found carrying it by the next tick's reconciliation; written again on completion.
    expect(writes.map((s) => s.attributes)).toEqual([
      { ...target, 'rollout.stage.index': 0, 'rollout.percent': 10, 'rollout.final': false },
      {
        ...target,
        'rollout.stage.index': 0,
        'rollout.percent': 10,
        'rollout.final': false,
        'rollout.actuation.verdict': 'converged',
        'rollout.actuation.wrote': false,
      },
      { ...target, 'rollout.stage.index': 1, 'rollout.percent': 100, 'rollout.final': true },
    ]);

    for (const s of [...decisions, ...reads, ...writes]) expect(s.status.code).toBe(SpanStatusCode.UNSET);
    // The creation event was handled in the user's span: its decision and the write it asked for are children of it; the ticks had no parent.
    const requestId = request!().spanId;
    expect([decisions[0], writes[0]].map((s) => parentOf(s!))).toEqual([requestId, requestId]);
    expect([decisions[1], decisions[2], ...reads, writes[1], writes[2]].map((s) => parentOf(s!))).toEqual([null, null, null, null, null, null]);
    noAddresses(recorded.spans());
    expect(recorded.diagnostics).toEqual([]);
  });

  it('a gate whose provider cannot answer, a target not configured here, and a decision by a deposed leader each fail their span, with the reason', async () => {
    const a = promoter(backend, 'leader-b');
    const { id } = await createRollout(a.engine, { spec: spec({ gateUrl: deadUrl, gate: 'deploy-window', actuators: ['flags', 'nowhere'] }), actor: 'alice' });
    await a.batch.tick(); // activates the canary; moves flags, and cannot move nowhere
    await a.batch.tick(); // reads the gate: no answer
    const epoch = a.elector.token()!.epoch;

    const [reading] = await backend.rollouts.gateReadings(id);
    expect(reading).toMatchObject({ gate: 'deploy-window', outcome: 'inconclusive' });
    const [read] = of(SPAN.gateRead, id);
    expect(read!.attributes).toMatchObject({ 'rollout.gate.name': 'deploy-window', 'rollout.gate.outcome': 'inconclusive', 'lease.epoch': epoch });
    expect(read!.attributes['rollout.gate.value']).toBeUndefined();
    expect(read!.status).toEqual({ code: SpanStatusCode.ERROR, message: reading!.reason });

    // Each tick converges both targets: flags is written, then found carrying it; nowhere fails both times.
    const actuated = of(SPAN.actuate, id);
    const flags = actuated.filter((s) => s.attributes['rollout.target'] === 'flags');
    expect(flags.map((s) => [s.attributes['rollout.actuation.verdict'], s.status.code])).toEqual([
      ['write', SpanStatusCode.UNSET],
      ['converged', SpanStatusCode.UNSET],
    ]);
    const record = (await backend.rollouts.actuations(id)).find((r) => r.target === 'nowhere')!;
    const nowhere = actuated.filter((s) => s.attributes['rollout.target'] === 'nowhere');
    expect(nowhere).toHaveLength(2);
    for (const s of nowhere) {
      expect(s.attributes).toMatchObject({
        'rollout.actuator.kind': 'unknown',
        'rollout.actuation.verdict': 'unknown-target',
        'rollout.actuation.wrote': false,
      });
      expect(s.status).toEqual({ code: SpanStatusCode.ERROR, message: record.reason });
    }

    // Another leader takes over; the old one's token is stale, and its command is fenced.
    const stale = a.elector.token()!;
    a.clock.advance(LEASE.ttlMs + LEASE.clockSkewMs + 1);
    const b = promoter(backend, 'leader-c', a.clock);
    expect(await campaignEachTime(b.elector)()).not.toBeNull();
    await expect(runCommand(a.engine, stale, { rolloutId: id, command: 'pause', actor: 'alice' })).rejects.toMatchObject({ name: 'FencedError' });
    const fenced = of(SPAN.decide, id).find((s) => s.attributes['rollout.transition'] === 'pause')!;
    expect(fenced.attributes).toMatchObject({ 'rollout.actor': 'alice', 'lease.epoch': stale.epoch });
    expect(fenced.attributes['rollout.outcome']).toBeUndefined();
    expect(fenced.status.code).toBe(SpanStatusCode.ERROR);
    expect(fenced.events.map((e) => [e.name, e.attributes?.['exception.type']])).toEqual([['exception', 'FencedError']]);
    noAddresses(recorded.spans());
    expect(recorded.diagnostics).toEqual([]);
  });

  it("a worker's items: a span each with its run, item, attempt, worker and outcome; the handler's own spans are its children; a throw fails it", async () => {
    const { runId, databaseUrl } = await runOf(backend, [{ n: 1 }, { n: 2, fail: true }]);
    const user = trace.getTracer('user-app');
    // Stopped once both items have reached the handler: the step running the second finishes (its outcome recorded) before run() resolves.
    const stop = new AbortController();
    let calls = 0;
    const handler: WorkHandler = (item) =>
      user.startActiveSpan('reindex', (span) => {
        if (++calls === 2) stop.abort();
        try {
          if ((item.payload as { fail?: boolean }).fail) throw new Error('bad input: no such document');
          return { ok: true };
        } finally {
          span.end();
        }
      });
    // Not until done: a failed item waits for the coordinator (none here) to fail it for good.
    const summary = await createWorker({ ...workerOptions(databaseUrl, runId, 'traced-worker', handler), exitWhenDone: false }).run(stop.signal);
    expect(summary).toMatchObject({ exit: 'stopped', done: 1, failedAttempts: 1 });

    const items = (await backend.ledger.items(runId, { limit: 10 })).items;
    const idOf = (n: number) => items.find((i) => (i.payload as { n: number }).n === n)!.id;
    const spans = recorded.spans(SPAN.item);
    const byItem = new Map(spans.map((s) => [s.attributes['run.item.id'], s]));
    expect(spans).toHaveLength(2);
    expect(byItem.get(idOf(1))!.attributes).toEqual({
      'run.id': runId,
      'run.item.id': idOf(1),
      'run.item.attempt': 1,
      'worker.id': 'traced-worker',
      'run.item.outcome': 'ok',
    });
    expect(byItem.get(idOf(1))!.status.code).toBe(SpanStatusCode.UNSET);
    const failed = byItem.get(idOf(2))!;
    expect(failed.attributes).toEqual({
      'run.id': runId,
      'run.item.id': idOf(2),
      'run.item.attempt': 1,
      'worker.id': 'traced-worker',
      'run.item.outcome': 'failed',
    });
    expect(failed.status).toEqual({ code: SpanStatusCode.ERROR, message: 'bad input: no such document' });
    expect(failed.events.map((e) => [e.name, e.attributes?.['exception.message']])).toEqual([['exception', 'bad input: no such document']]);
    expect(items.find((i) => i.id === idOf(2))).toMatchObject({
      state: 'pending',
      attempts: 1,
      error: expect.stringContaining('bad input: no such document') as unknown,
    });

    const handlerSpans = recorded.spans('reindex');
    expect(handlerSpans.map((s) => parentOf(s)).sort()).toEqual(spans.map((s) => s.spanContext().spanId).sort());
    expect(recorded.diagnostics).toEqual([]);
  });
});
