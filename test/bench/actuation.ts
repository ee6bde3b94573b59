/**
 * npm run bench -- actuation [--rollouts N] [--warmup-rollouts N] [--seconds S] [--rounds N] [--connections C] [--window-ms MS] [--parts actuation,assignment,openfeature] [--node-cpu-prof DIR]
 *
 * Three figures, each beside its raw floor taken in the same run:
 *
 * 1. Commit → weight live, per target, for real transitions: RolloutEngine
 *    with an Actuation over PostgreSQL moves a rollout of 8 stages
 *    (5/20/35/50/65/80/95/100 %) through its activation (the promoter's
 *    evaluate), 7 promote commands and an abort, `--rollouts` times after
 *    `--warmup-rollouts`. "Live" is an observer's view, not the writer's:
 *    for nginx (a real one splitting between two tiny versions), the first
 *    answer of the new side to a request, on a connection of its own, with
 *    a probe key chosen to change sides at that transition; for the Lambda
 *    alias (moto behind the RevisionId proxy), the first GetAlias on moto
 *    showing the new weight. The observer runs in a worker thread, with
 *    nginx's upstreams, so its load stays off the engine's event loop.
 *    Measured from just before the fenced commit (the store's apply) until
 *    then; "converged" is until the command returned (nginx's old workers
 *    gone, the record written). The raw twin of each target makes the same
 *    moves with the target's operation alone (nginx: the file, nginx -t,
 *    reload; Lambda: one conditioned UpdateAlias), alternately with ours,
 *    watched the same way.
 * 2. GET /rollouts/{id}/assignment?entity=E requests/s on one `rollout serve`
 *    node (PostgreSQL), distinct entities, driven by wrk, against a bare Node
 *    HTTP server answering the same JSON as a constant, in alternating
 *    windows.
 * 3. OpenFeature resolutions/s in process: getStringValue through the SDK's
 *    client and our RolloutProvider (cache warm) over distinct entities,
 *    against `assign(traffic, entity)` alone, in alternating windows.
 *
 * Needs nginx, wrk and moto (ROLLOUT_MOTO_URL). Last line: one JSON object.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setImmediate as yieldNow } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { OpenFeature } from '@openfeature/server-sdk';
import { freePort } from '../../infra/local/processes.js';
import { Actuation } from '../../shared/actuation/reconcile.js';
import { systemClock } from '../../shared/clock.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { RolloutProvider } from '../../shared/openfeature/provider.js';
import { assign, type RolloutTraffic } from '../../shared/rollout/assignment.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { freshDatabase, openBackend, type LeaseBackend } from '../support/backends.js';
import { clock, lambdaTargets, nginxTargets, Observer, type BenchTarget } from './actuation-targets.js';
import { builtCli } from './built.js';
import { percentile, round3 } from './raw.js';

const { values: args } = parseArgs({
  options: {
    rollouts: { type: 'string', default: '12' },
    'warmup-rollouts': { type: 'string', default: '1' },
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '16' },
    'window-ms': { type: 'string', default: '1000' },
    parts: { type: 'string', default: 'actuation,assignment,openfeature' },
    /** Write the node's CPU profile (V8 .cpuprofile) here, to see where an assignment request's time goes. */
    'node-cpu-prof': { type: 'string' },
  },
});
const ROLLOUTS = Number(args.rollouts);
const WARMUP_ROLLOUTS = Number(args['warmup-rollouts']);
const SECONDS = Number(args.seconds);
const ROUNDS = Number(args.rounds);
const CONNECTIONS = Number(args.connections);
const WINDOW_MS = Number(args['window-ms']);
const parts = new Set(args.parts.split(',').map((s) => s.trim()));
const root = resolve(import.meta.dirname, '../..');

const STAGES = [5, 20, 35, 50, 65, 80, 95, 100];
/** The shares a rollout moves its target through: activation, every promote short of completion, abort. */
const PATH = [0, ...STAGES, 0];

/** What a Ctrl-C or the harness's SIGTERM must still stop: nginx and the child processes outlive this process otherwise. */
const onSignal = new Set<() => Promise<unknown>>();
let signalled = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    signalled = true;
    void Promise.allSettled([...onSignal].map((stop) => stop())).finally(() => process.exit(130));
  });
}

const med = (xs: number[]) => percentile(xs, 50);
const stats = (xs: number[], prefix: string) => ({
  [`${prefix}_p50_ms`]: round3(percentile(xs, 50)),
  [`${prefix}_p99_ms`]: round3(percentile(xs, 99)),
  [`${prefix}_min_ms`]: round3(Math.min(...xs)),
  [`${prefix}_max_ms`]: round3(Math.max(...xs)),
});

function required(): void {
  const missing: string[] = [];
  if (parts.has('actuation') && !process.env.ROLLOUT_MOTO_URL) missing.push("moto (ROLLOUT_MOTO_URL; pip install 'moto[server]==5.2.1')");
  if (parts.has('assignment') && spawnSync('wrk', ['--version']).error) missing.push('wrk (apt-get install wrk)');
  if (!process.env.DATABASE_URL) missing.push('DATABASE_URL (run through npm run bench, which starts PostgreSQL)');
  if (missing.length) {
    console.error(`bench actuation needs ${missing.join(', ')}`);
    process.exit(2);
  }
}

// ------------------------------------------------------------ 1. actuation

interface TargetFigures {
  live: number[];
  /** Commit → the actuator's write called: our bookkeeping before the target is touched. */
  toWrite: number[];
  converged: number[];
  rawLive: number[];
  rawOp: number[];
}

async function actuationOf(backend: LeaseBackend, target: BenchTarget): Promise<TargetFigures> {
  // The fenced commit's start, as the engine makes it: every applied transition, in order.
  const commits: number[] = [];
  const store = backend.rollouts;
  const apply = store.apply.bind(store);
  store.apply = async (token, plan) => {
    const t = clock();
    const applied = await apply(token, plan);
    if (applied) commits.push(t);
    return applied;
  };
  const writes: number[] = [];
  const actuator = target.actuator;
  const write = actuator.write.bind(actuator);
  actuator.write = (...a) => (writes.push(clock()), write(...a));
  const actuation = new Actuation(store, new Map([[target.name, actuator]]), systemClock);
  const engine = new RolloutEngine({ store, bus: new InProcessBus(), actuation });
  const elector = new LeaseElector(backend.store, {
    name: 'promotion_leader',
    holderId: 'bench',
    ttlMs: 600_000,
    renewIntervalMs: 200_000,
    retryIntervalMs: 5_000,
  });
  const leadership = campaignEachTime(elector);
  const spec = {
    target: { service: 'bench', version: target.newVersion, stableVersion: target.stableVersion },
    actuators: [target.name],
    // Bakes no promoter reaches: only the bench's commands move the rollout.
    stages: STAGES.map((percent, i) => ({ name: `s${i}`, percent, bakeSeconds: 3_600 })),
  };
  const out: TargetFigures = { live: [], toWrite: [], converged: [], rawLive: [], rawOp: [] };
  for (let r = 0; r < WARMUP_ROLLOUTS + ROLLOUTS; r++) {
    const keep = r >= WARMUP_ROLLOUTS;
    const token = await leadership();
    if (!token) throw new Error('the bench does not lead: another holder has the promotion lease');
    const { id } = await createRollout(engine, { spec, actor: 'bench' });
    for (let step = 0; step + 1 < PATH.length; step++) {
      const [from, to] = [PATH[step]!, PATH[step + 1]!];
      const transition =
        step === 0
          ? () => engine.evaluate(id, token)
          : step === PATH.length - 2
            ? () => runCommand(engine, token, { rolloutId: id, command: 'abort', actor: 'bench' })
            : () => runCommand(engine, token, { rolloutId: id, command: 'promote', actor: 'bench' });
      const ours = async () => {
        const watch = await target.watch(from, to);
        commits.length = 0;
        writes.length = 0;
        await transition();
        const returned = clock();
        const live = await watch.live;
        if (commits.length !== 1 || writes.length !== 1)
          throw new Error(`${target.kind}: step ${step} of ${id} committed ${commits.length} transitions and wrote ${writes.length} times, expected 1 and 1`);
        const record = (await store.actuations(id))[0];
        if (record?.state !== 'converged' || record.percent !== to)
          throw new Error(`${target.kind}: step ${step} of ${id} left the record ${JSON.stringify(record)}, expected ${to}% converged`);
        if (keep) {
          out.live.push(live - commits[0]!);
          out.toWrite.push(writes[0]! - commits[0]!);
          out.converged.push(returned - commits[0]!);
        }
      };
      const raw = async () => {
        const r = await target.raw(from, to);
        if (keep) {
          out.rawLive.push(r.live);
          out.rawOp.push(r.op);
        }
      };
      // Alternating which goes first, so neither always follows the other's leftovers (a reload's old worker exiting, a GC).
      for (const f of (r + step) % 2 ? [raw, ours] : [ours, raw]) await f();
    }
  }
  store.apply = apply;
  actuator.write = write;
  return out;
}

function targetRow(f: TargetFigures, rawOpName: string) {
  return {
    n: f.live.length,
    ...stats(f.live, 'live'),
    commit_to_write_p50_ms: round3(med(f.toWrite)),
    commit_to_write_p99_ms: round3(percentile(f.toWrite, 99)),
    ...stats(f.converged, 'converged'),
    ...stats(f.rawLive, 'raw_live'),
    ...stats(f.rawOp, rawOpName),
    live_p50_vs_raw_live_p50: round3(med(f.live) / med(f.rawLive)),
    live_p99_vs_raw_live_p99: round3(percentile(f.live, 99) / percentile(f.rawLive, 99)),
    overhead_p50_ms: round3(med(f.live) - med(f.rawLive)),
  };
}

async function actuationPart(): Promise<Record<string, Record<string, number>>> {
  const backend = await openBackend('postgres');
  const observer = new Observer();
  const stopObserver = () => observer.close();
  onSignal.add(stopObserver);
  const out: Record<string, Record<string, number>> = {};
  try {
    const nginx = await nginxTargets(observer);
    try {
      const f = await actuationOf(backend, nginx);
      out.nginx = { ...targetRow(f, 'raw_test_and_reload'), probe_connection_errors: observer.retried };
      const n = out.nginx;
      console.log(
        `nginx          commit → live p50 ${n.live_p50_ms} / p99 ${n.live_p99_ms} ms (min ${n.live_min_ms}, max ${n.live_max_ms}, n ${n.n}; the write began ${n.commit_to_write_p50_ms} ms after the commit at p50); converged p50 ${n.converged_p50_ms} / p99 ${n.converged_p99_ms} ms · ` +
          `raw file + nginx -t + reload → live p50 ${n.raw_live_p50_ms} / p99 ${n.raw_live_p99_ms} ms (nginx -t + reload alone p50 ${n.raw_test_and_reload_p50_ms} ms) · ${n.live_p50_vs_raw_live_p50}× / ${n.live_p99_vs_raw_live_p99}× raw, +${n.overhead_p50_ms} ms at p50`,
      );
    } finally {
      await nginx.close();
    }
    const lambda = await lambdaTargets(process.env.ROLLOUT_MOTO_URL!, observer);
    try {
      const f = await actuationOf(backend, lambda);
      out.lambda_alias = { ...targetRow(f, 'raw_update_alias'), live_p50_vs_raw_update_alias_p50: round3(med(f.live) / med(f.rawOp)) };
      const l = out.lambda_alias;
      console.log(
        `lambda alias   commit → live p50 ${l.live_p50_ms} / p99 ${l.live_p99_ms} ms (min ${l.live_min_ms}, max ${l.live_max_ms}, n ${l.n}; the write began ${l.commit_to_write_p50_ms} ms after the commit at p50); converged p50 ${l.converged_p50_ms} / p99 ${l.converged_p99_ms} ms · ` +
          `raw UpdateAlias round trip alone p50 ${l.raw_update_alias_p50_ms} / p99 ${l.raw_update_alias_p99_ms} ms, UpdateAlias → live (watched as ours) p50 ${l.raw_live_p50_ms} / p99 ${l.raw_live_p99_ms} ms · ${l.live_p50_vs_raw_live_p50}× / ${l.live_p99_vs_raw_live_p99}× raw live, ${l.live_p50_vs_raw_update_alias_p50}× the UpdateAlias round trip at p50`,
      );
    } finally {
      await lambda.close();
    }
  } finally {
    onSignal.delete(stopObserver);
    await observer.close();
    await backend.close();
  }
  return out;
}

// ------------------------------------------------------------ 2. assignment

interface Child {
  readonly url: string;
  readonly process: ChildProcess;
  log(): string;
}

function started(child: ChildProcess, url: string, ready: string): Promise<Child> {
  let log = '';
  const keep = (c: Buffer) => void (log = (log + c.toString()).slice(-4000));
  child.stderr?.on('data', keep);
  return new Promise((done, fail) => {
    child.once('exit', (code) => fail(new Error(`${url}: exited with ${code} before it was ready\n${log}`)));
    child.stdout?.on('data', (c: Buffer) => {
      keep(c);
      if (log.includes(ready)) done({ url, process: child, log: () => log });
    });
  });
}

/** A cluster node as `rollout serve` runs it, on a database of its own; rate limits off, as a load test needs. */
async function serveNode(databaseUrl: string): Promise<Child> {
  const port = await freePort();
  const flags = [
    'serve',
    '--node-id',
    'bench',
    '--port',
    String(port),
    '--database-url',
    databaseUrl,
    '--rate-limit',
    '0',
    '--rate-limit-per-credential',
    '0',
    '--tick-interval',
    '1',
  ];
  const profile = args['node-cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', resolve(args['node-cpu-prof'])] : [];
  // As a user runs it: the built package (npm run build), not the sources through a loader.
  const child = spawn(process.execPath, [...profile, builtCli(), ...flags], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  return started(child, `http://127.0.0.1:${port}`, '"event":"serving"');
}

/** The floor: Node's HTTP server answering a constant body, nothing else. */
async function bareServer(body: string): Promise<Child> {
  const port = await freePort();
  const script = `const b = Buffer.from(process.env.BODY); require('node:http').createServer((q, s) => { s.writeHead(200, { 'content-type': 'application/json', 'content-length': b.length }); s.end(b); }).listen(${port}, '127.0.0.1', () => console.log('listening'));`;
  const child = spawn(process.execPath, ['-e', script], { env: { ...process.env, BODY: body }, stdio: ['ignore', 'pipe', 'pipe'] });
  return started(child, `http://127.0.0.1:${port}`, 'listening');
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A rollout at 50 % on the node, created once it leads; its traffic once the stage is active. */
async function splitRollout(node: Child): Promise<RolloutTraffic> {
  const spec = {
    target: { service: 'bench', version: 'v2', stableVersion: 'v1' },
    stages: [
      { name: 'half', percent: 50, bakeSeconds: 3_600 },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
  };
  await until('the node leads and takes the rollout', 30_000, async () => {
    const res = await fetch(`${node.url}/rollouts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'bench', spec }),
    });
    return res.status === 201 || res.status === 200 ? true : undefined;
  });
  return until('the first stage active', 30_000, async () => {
    const t = (await (await fetch(`${node.url}/rollouts/bench/traffic`)).json()) as RolloutTraffic;
    return t.percent === 50 ? t : undefined;
  });
}

/** Every request a distinct entity: the node cannot answer from anything it saw before. */
const DISTINCT = `local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/rollouts/bench/assignment?entity=user-" .. n)
end
`;

/** Spawned, not run synchronously: a blocked event loop would keep this process's pooled keep-alive sockets past the node's timeout. */
async function wrk(url: string, script: string, seconds: number, connections: number): Promise<number> {
  const child = spawn('wrk', ['-t', '1', '-c', String(connections), '-d', `${seconds}s`, '-s', script, url], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  if (code !== 0) throw new Error(`wrk: exit ${code}: ${stderr}`);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(stdout);
  if (non2xx) throw new Error(`wrk saw ${non2xx[1]} answers that were not 200 from ${url}:\n${stdout}`);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(stdout);
  if (!rps) throw new Error(`wrk printed no rate:\n${stdout}`);
  return Number(rps[1]);
}

/** User + system CPU a child has used, from /proc (clock ticks of 10 ms). */
function cpuSeconds(c: Child): number {
  const fields = readFileSync(`/proc/${c.process.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function assignmentPart(node: Child): Promise<Record<string, number | number[]>> {
  const dir = mkdtempSync(join(tmpdir(), 'rollout-bench-actuation-'));
  const script = join(dir, 'distinct.lua');
  writeFileSync(script, DISTINCT);
  // The bare server answers what the node answers for one entity, byte for byte in length.
  const body = await (await fetch(`${node.url}/rollouts/bench/assignment?entity=user-1`)).text();
  const bare = await bareServer(body);
  const stopBare = () => Promise.resolve(bare.process.kill('SIGTERM'));
  onSignal.add(stopBare);
  const ours: number[] = [];
  const floor: number[] = [];
  const cpuNode: number[] = [];
  const cpuBare: number[] = [];
  try {
    // Warm-up: compiled code, the node's connection pool and PostgreSQL's plan cache out of the figures.
    await wrk(node.url, script, 2, 4);
    await wrk(bare.url, script, 1, 4);
    for (let i = 0; i < ROUNDS; i++) {
      const pair: [Child, number[]][] =
        i % 2
          ? [
              [bare, floor],
              [node, ours],
            ]
          : [
              [node, ours],
              [bare, floor],
            ];
      const cpu = new Map<Child, number>();
      for (const [c, into] of pair) {
        const before = cpuSeconds(c);
        const rps = await wrk(c.url, script, SECONDS, CONNECTIONS);
        into.push(rps);
        cpu.set(c, ((cpuSeconds(c) - before) / (rps * SECONDS)) * 1e6);
      }
      cpuNode.push(cpu.get(node)!);
      cpuBare.push(cpu.get(bare)!);
      console.log(
        `assignment round ${i + 1}: node ${ours.at(-1)!.toFixed(0)} req/s (${cpu.get(node)!.toFixed(1)} µs CPU a request), bare Node server ${floor.at(-1)!.toFixed(0)} req/s (${cpu.get(bare)!.toFixed(1)} µs)`,
      );
    }
  } finally {
    onSignal.delete(stopBare);
    bare.process.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
  const ratio = med(ours) / med(floor);
  console.log(`assignment     median node ${med(ours).toFixed(0)} req/s, bare Node server ${med(floor).toFixed(0)} req/s: ${ratio.toFixed(3)}× (goal ≥ 0.5×)`);
  return {
    node_rps: ours.map(round3),
    bare_rps: floor.map(round3),
    node_median_rps: round3(med(ours)),
    bare_median_rps: round3(med(floor)),
    ratio: round3(ratio),
    goal: 0.5,
    node_cpu_us_per_request: round3(med(cpuNode)),
    bare_cpu_us_per_request: round3(med(cpuBare)),
    seconds: SECONDS,
    rounds: ROUNDS,
    connections: CONNECTIONS,
  };
}

// ----------------------------------------------------------- 3. OpenFeature

const ENTITIES = Array.from({ length: 100_000 }, (_, i) => `user-${i}`);

/** Operations per second over one window of WINDOW_MS, yielding between chunks so timers and I/O (the provider's refresh) run as they would. */
async function window(op: (entity: string) => unknown, async: boolean): Promise<number> {
  const CHUNK = 1_000;
  let done = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < WINDOW_MS) {
    const start = done % ENTITIES.length;
    if (async) for (let i = 0; i < CHUNK; i++) await op(ENTITIES[(start + i) % ENTITIES.length]!);
    else for (let i = 0; i < CHUNK; i++) op(ENTITIES[(start + i) % ENTITIES.length]!);
    done += CHUNK;
    await yieldNow();
  }
  return done / ((performance.now() - t0) / 1000);
}

async function openFeaturePart(node: Child, traffic: RolloutTraffic): Promise<Record<string, number | number[]>> {
  const provider = new RolloutProvider({ baseUrl: node.url, preload: ['bench'] });
  await OpenFeature.setProviderAndWait('bench', provider);
  const client = OpenFeature.getClient('bench');
  try {
    // The provider's answers are the rule's, entity by entity, before anything is timed.
    for (const e of ENTITIES.slice(0, 10_000)) {
      const got = await client.getStringValue('bench', 'v1', { targetingKey: e });
      if (got !== assign(traffic, e).version) throw new Error(`OpenFeature answered ${got} for ${e}, assign() says ${assign(traffic, e).version}`);
    }
    let sink = 0;
    const viaClient = async (e: string) => void ((await client.getStringValue('bench', 'v1', { targetingKey: e })) === 'v2' && sink++);
    // The provider called as the SDK calls it, without the SDK: what of the cost is ours and what is the SDK's.
    const viaProvider = async (e: string) => void ((await provider.resolveStringEvaluation('bench', 'v1', { targetingKey: e })).value === 'v2' && sink++);
    const rule = (e: string) => void (assign(traffic, e).variant === 'new' && sink++);
    const series: [string, (e: string) => unknown, boolean, number[]][] = [
      ['client', viaClient, true, []],
      ['provider', viaProvider, true, []],
      ['assign', rule, false, []],
    ];
    for (let i = 0; i < ROUNDS; i++) {
      // Rotated each round, so no series always runs first after a yield (GC, the provider's refresh).
      for (let j = 0; j < series.length; j++) {
        const [, op, isAsync, into] = series[(i + j) % series.length]!;
        into.push(await window(op, isAsync));
      }
    }
    if (sink === 0) throw new Error('no entity was on the new version: the rollout is not split');
    const [of, direct, raw] = series.map(([, , , xs]) => xs) as [number[], number[], number[]];
    const ratio = med(of) / med(raw);
    console.log(
      `openfeature    getStringValue ${med(of).toFixed(0)}/s through the SDK's client, ${med(direct).toFixed(0)}/s from the provider alone, assign() alone ${med(raw).toFixed(0)}/s: ${ratio.toFixed(3)}× ` +
        `(rounds: ${of.map((x) => x.toFixed(0)).join(', ')} / ${direct.map((x) => x.toFixed(0)).join(', ')} / ${raw.map((x) => x.toFixed(0)).join(', ')})`,
    );
    return {
      client_per_s: of.map(round3),
      provider_alone_per_s: direct.map(round3),
      assign_per_s: raw.map(round3),
      client_median_per_s: round3(med(of)),
      provider_alone_median_per_s: round3(med(direct)),
      assign_median_per_s: round3(med(raw)),
      ratio: round3(ratio),
      window_ms: WINDOW_MS,
      rounds: ROUNDS,
    };
  } finally {
    await OpenFeature.close();
  }
}

// ------------------------------------------------------------------- main

async function main() {
  required();
  const out: Record<string, unknown> = { bench: 'actuation', stages: STAGES, rollouts: ROLLOUTS, transitions_per_rollout: PATH.length - 1 };
  if (parts.has('actuation')) out.actuation = await actuationPart();
  if (parts.has('assignment') || parts.has('openfeature')) {
    const db = await freshDatabase('bench_actuation');
    let node: Child | undefined;
    try {
      node = await serveNode(db.url);
      const started = node;
      onSignal.add(() => Promise.all([Promise.resolve(started.process.kill('SIGTERM')), db.drop()]));
      const traffic = await splitRollout(node);
      if (parts.has('assignment')) out.assignment = await assignmentPart(node);
      if (parts.has('openfeature')) out.openfeature = await openFeaturePart(node, traffic);
    } finally {
      if (node && node.process.exitCode === null) {
        const exited = new Promise((r) => node!.process.once('exit', r));
        node.process.kill('SIGTERM');
        await exited;
      }
      await db.drop();
    }
  }
  console.log(JSON.stringify(out));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    // Stopped from outside: what failed is what the signal's cleanup took away; its handler exits.
    if (signalled) return;
    console.error(err);
    process.exit(1);
  },
);
