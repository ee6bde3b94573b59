import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import pg from 'pg';
import { collect, exited } from '../../../infra/local/processes.js';
import type { ChaosHistory, FaultKind, FaultRecord, Op, TargetEdit } from '../history.js';
import { Rng } from '../rng.js';
import { onScheduleClock, StallWatch, worstStall } from '../stalls.js';
import { auditMark, dumpStore } from './audit.js';
import { SKEW_MARGIN_MS, TIMINGS, WORKER_HEARTBEAT_MS, type ChaosCluster, type ClusterNode, type ManagedProcess } from './cluster.js';
import { JUDGED_KINDS, judgedSpec, type JudgedKind } from './judged.js';
import type { Sampler, TargetName } from './targets.js';

/**
 * One schedule over the local cluster: a workload through the public surface
 * (HTTP through nginx and straight to nodes, POST /events, the CLI), faults
 * from a seeded plan while it runs, then healing and a bounded quiet period;
 * then the store is dumped with plain SQL and everything goes into a
 * ChaosHistory for the checker.
 */

const root = resolve(import.meta.dirname, '../../..');
const wall = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Faults on the targets rollouts move: one of them closes every schedule, after the others (a rotation of its own). */
export const ACTUATION_FAULTS: readonly FaultKind[] = ['target-outside-writer', 'pause-mid-actuation', 'target-write-delayed'];

export const LOCAL_FAULTS: readonly FaultKind[] = [
  'kill-leader',
  'kill-follower',
  'kill-worker',
  'kill-coordinator',
  'pause-leader',
  'zombie-leader',
  'restart-leader',
  'store-restart',
  'store-blackhole',
  'store-delay',
  'store-lose-replies',
  'clock-offset',
  'signals-duplicated',
  'signals-reordered',
  'signals-late',
  'slow-promotion',
  ...ACTUATION_FAULTS,
];

const TTL_MS = TIMINGS.ttlS * 1000;
/** A long item outlasts the failure timeout (the TTL) and two coordinator scans. */
const LONG_ITEM_MS = TTL_MS + 2_500;
/** After the last fault heals: a leader within TTL + one election interval + the skew margin, plus a second of scheduling slack on a loaded 2-core host. */
const LEADER_WITHIN_MS = TTL_MS + TIMINGS.electionS * 1000 + SKEW_MARGIN_MS + 1_000;
/** Every run finishes within this after healing: re-pends after one failure timeout, the scan's cadence (1 s here), the rest of the work. */
const RUNS_FINISH_WITHIN_MS = 30_000;
const QUIET_MAX_MS = 35_000;
/** The quiet run's payloads are numbered from here, apart from the main run's. */
const QUIET_RUN_FIRST_N = 1_000_000;
/** What one target write may take here: nginx -t, a reload whose old worker must be gone, the read-back, on a loaded 2-core host. */
const WRITE_SLACK_MS = 3_000;

export interface FaultPlan {
  readonly kind: FaultKind;
  /** Chooses targets and durations. */
  readonly pick: number;
}

/**
 * The plan for one schedule: which faults, in what order. Round-robin over a
 * seeded shuffle, so a few schedules cover every kind; then one actuation
 * fault, round-robin over its own shuffle (so the other faults' plan is what
 * it was before targets were added, and every schedule moves a target under
 * a fault).
 */
export function planFaults(seed: string, schedule: number, perSchedule: number, kinds: readonly FaultKind[] = LOCAL_FAULTS): FaultPlan[] {
  const base = kinds.filter((k) => !ACTUATION_FAULTS.includes(k));
  const actuation = kinds.filter((k) => ACTUATION_FAULTS.includes(k));
  const order = new Rng(`${seed}/kinds`).shuffle([...base]);
  const rng = new Rng(`${seed}/${schedule}`);
  const plan = base.length
    ? Array.from({ length: perSchedule }, (_, i) => ({ kind: order[(schedule * perSchedule + i) % order.length]!, pick: rng.int(1_000_000) }))
    : [];
  if (actuation.length) plan.push({ kind: new Rng(`${seed}/actuation-kinds`).shuffle([...actuation])[schedule % actuation.length]!, pick: rng.int(1_000_000) });
  return plan;
}

type SignalMode = { duplicated: boolean; reordered: boolean; late: boolean };

interface Ctx {
  readonly cluster: ChaosCluster;
  /** The harness process's own stalls. */
  readonly watch: StallWatch;
  readonly epochMs: number;
  readonly ops: Op[];
  readonly faults: FaultRecord[];
  readonly rng: Rng;
  readonly signals: SignalMode;
  nextOp: number;
  stopping: boolean;
  /** A rollout nothing but the zombie-leader fault writes to (no readings, no commands). */
  readonly quiet: string;
  /** A rollout that gets readings only from the slow-promotion fault. */
  readonly slow: string;
  /** A rollout that gets readings only from the actuation faults. */
  readonly act: string;
  /** The rollout people command. */
  readonly manual: string;
  /** Each rollout that moves traffic, and its target. */
  readonly targetOf: ReadonlyMap<string, TargetName>;
  readonly sampler: Sampler;
  readonly edits: TargetEdit[];
  readonly log: (line: string) => void;
}

const now = (c: Ctx) => wall() - c.epochMs;

/** One HTTP call as a history op: ok / failed (a node said no) / unknown (no node answered). */
async function call(
  c: Ctx,
  o: { client: string; kind: string; base: string; via: string; method: string; path: string; body?: unknown; key?: string; target?: string; retries?: number },
): Promise<Op> {
  const op: Op = {
    id: c.nextOp++,
    client: o.client,
    kind: o.kind,
    via: o.via,
    invokedAt: now(c),
    completedAt: null,
    outcome: 'unknown',
    ...(o.key ? { key: o.key } : {}),
    ...(o.target ? { target: o.target } : {}),
  };
  c.ops.push(op);
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await fetch(`${o.base}${o.path}`, {
        method: o.method,
        headers: { 'content-type': 'application/json', 'x-rollout-actor': o.client, ...(o.key ? { 'idempotency-key': o.key } : {}) },
        ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
        signal: AbortSignal.timeout(20_000),
      });
      const text = await res.text();
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        body = { error: text.slice(0, 120) };
      }
      const node = res.headers.get('x-rollout-node-id');
      op.completedAt = now(c);
      op.status = res.status;
      if (node) op.node = node;
      op.result = body;
      if (res.status < 400) op.outcome = 'ok';
      else if (node && res.status !== 502 && res.status !== 504) op.outcome = 'failed';
      else op.outcome = 'unknown';
      if (op.outcome !== 'ok') op.detail = (typeof body.error === 'string' ? body.error : res.statusText).slice(0, 160);
    } catch (err) {
      op.completedAt = now(c);
      op.outcome = 'unknown';
      op.detail = err instanceof Error ? `${err.name}: ${err.message}`.slice(0, 160) : String(err);
    }
    // A write retried under the same key (as the CLI does): the system must apply it once.
    const retryable = op.outcome === 'unknown' || (op.status !== undefined && op.status >= 500);
    if (!retryable || attempt >= (o.retries ?? 0) || c.stopping) return op;
    await sleep(300);
  }
}

function rolloutSpec(key: string, expect: 'promote' | 'rollback' | 'any', target?: TargetName) {
  const gates = { maxErrorRate: 0.05, minRequests: 10 };
  return {
    target: { service: 'chaos', version: 'v2', labels: { key, bakeMs: '1000', expect } },
    ...(target ? { actuators: [target] } : {}),
    stages: [
      { name: 'canary', percent: 10, bakeSeconds: 1, gates },
      { name: 'half', percent: 50, bakeSeconds: 1, gates },
      { name: 'all', percent: 100, bakeSeconds: 0, gates },
    ],
  };
}

function pickNode(c: Ctx): ClusterNode {
  return c.cluster.nodes[c.rng.int(c.cluster.nodes.length)]!;
}

/**
 * Metric reports for one rollout until the schedule ends: healthy, or breaching
 * once `breachAfterMs` passed. A racer, once breaching, reports straight to
 * the leader every few tens of milliseconds, so some breaches land while the
 * leader's tick holds an older, healthy evaluation of the same rollout.
 */
async function signalLoop(c: Ctx, id: string, breachAfterMs: number | null, racer = false): Promise<void> {
  let last: { stage: number; at: number } | null = null;
  while (!c.stopping) {
    const breachingNow = breachAfterMs !== null && now(c) > breachAfterMs;
    const rushing = racer && breachingNow;
    const viaNode = rushing || c.rng.int(3) === 0;
    const node = (rushing ? await c.cluster.leader() : null) ?? pickNode(c);
    const base = viaNode ? node.url : c.cluster.nginxUrl;
    const read = await call(c, {
      client: `signals-${id.slice(-1)}`,
      kind: 'read.rollout',
      base,
      via: viaNode ? node.id : 'nginx',
      method: 'GET',
      path: `/rollouts/${id}`,
      target: id,
    });
    const view = read.result as { state?: string; stages?: { index?: number; phase?: string }[] } | undefined;
    if (view?.state && ['completed', 'rolled_back', 'aborted'].includes(view.state)) return;
    const active = view?.stages?.find((s) => s.phase === 'active');
    if (active && typeof active.index === 'number') {
      const breaching = breachAfterMs !== null && now(c) > breachAfterMs;
      const at = c.signals.late ? Date.now() - 20_000 : Date.now();
      const event = {
        type: 'rollout.metrics_reported',
        rolloutId: id,
        stage: active.index,
        requests: 100,
        errors: breaching ? 40 : 0,
        p99LatencyMs: 50,
        observedAt: at,
      };
      const send = (e: typeof event) =>
        call(c, {
          client: `signals-${id.slice(-1)}`,
          kind: 'signal.metrics',
          base,
          via: viaNode ? node.id : 'nginx',
          method: 'POST',
          path: '/events',
          body: e,
          target: id,
        });
      await send(event);
      if (c.signals.duplicated) await send(event);
      // An older reading arriving after a newer one.
      if (c.signals.reordered && last && last.stage === active.index) await send({ ...event, errors: breaching ? 0 : event.errors, observedAt: last.at - 500 });
      last = { stage: active.index, at };
    }
    await sleep(rushing ? 30 : 250);
  }
}

async function readerLoop(c: Ctx, paths: readonly string[]): Promise<void> {
  let i = 0;
  while (!c.stopping) {
    const path = paths[i++ % paths.length]!;
    await call(c, {
      client: 'reader',
      kind: path.startsWith('/cluster') ? 'read.leader' : path.startsWith('/runs') ? 'read.run' : 'read.rollout',
      base: c.cluster.nginxUrl,
      via: 'nginx',
      method: 'GET',
      path,
    });
    await sleep(150);
  }
}

/** Manual commands on one rollout, each under its own Idempotency-Key (the reason carries it, so the store shows which command did what). */
async function commandLoop(c: Ctx, id: string, keyPrefix: string): Promise<void> {
  const commands = ['pause', 'resume', 'promote', 'pause', 'abort', 'retry', 'resume'] as const;
  for (const [i, command] of commands.entries()) {
    if (c.stopping) return;
    await sleep(700 + c.rng.int(800));
    const key = `${keyPrefix}-${command}-${i}`;
    if (i === 3) {
      await cliCommand(c, id, command, key);
      continue;
    }
    await call(c, {
      client: 'operator',
      kind: `rollout.${command}`,
      base: c.cluster.nginxUrl,
      via: 'nginx',
      method: 'POST',
      path: `/rollouts/${id}/${command}`,
      body: command === 'pause' || command === 'abort' ? { reason: key } : {},
      key,
      target: id,
      retries: 8,
    }).then((op) => {
      const action = (op.result as { action?: { applied?: boolean; transition?: string } } | undefined)?.action;
      if (action) op.result = { applied: action.applied === true, transition: action.transition };
    });
  }
}

/** The same command through the `rollout` CLI, as an operator would type it. */
async function cliCommand(c: Ctx, id: string, command: string, key: string): Promise<void> {
  const op: Op = {
    id: c.nextOp++,
    client: 'cli',
    kind: `rollout.${command}`,
    via: 'cli',
    invokedAt: now(c),
    completedAt: null,
    outcome: 'unknown',
    key,
    target: id,
  };
  c.ops.push(op);
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      resolve(root, 'shared/runtimes/cli/cli.ts'),
      'rollouts',
      command,
      id,
      '--reason',
      key,
      '--url',
      c.cluster.nginxUrl,
      '--actor',
      'cli',
      '--json',
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const out = collect(child);
  await exited(child);
  op.completedAt = now(c);
  op.outcome = child.exitCode === 0 ? 'ok' : 'failed';
  try {
    const body = JSON.parse(
      out()
        .trim()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .at(-1) ?? '{}',
    ) as { action?: { applied?: boolean; transition?: string } };
    if (body.action) op.result = { applied: body.action.applied === true, transition: body.action.transition };
  } catch {
    op.detail = out().slice(-160);
  }
  if (op.outcome !== 'ok') op.detail = out().slice(-160);
}

// ── the nemesis ─────────────────────────────────────────────────────────────

async function restartLogged(c: Ctx, f: FaultRecord, start: () => Promise<void>): Promise<void> {
  try {
    await start();
  } catch (err) {
    c.log(`[chaos] restart after ${f.kind} failed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
}

async function leaderOr(c: Ctx, pick: number): Promise<ClusterNode> {
  return (await c.cluster.leader()) ?? c.cluster.nodes[pick % c.cluster.nodes.length]!;
}

async function inject(c: Ctx, plan: FaultPlan, workers: ManagedProcess[], startWorker: (w: ManagedProcess) => void): Promise<void> {
  const cl = c.cluster;
  const record = (target: string, detail?: string): FaultRecord => {
    const f: FaultRecord = { kind: plan.kind, target, startAt: now(c), endAt: null, ...(detail ? { detail } : {}) };
    c.faults.push(f);
    c.log(`[chaos] ${(f.startAt / 1000).toFixed(1)}s ${plan.kind} → ${target}${detail ? ` (${detail})` : ''}`);
    return f;
  };
  const end = (f: FaultRecord) => (f.endAt = now(c));
  const p = plan.pick;
  switch (plan.kind) {
    case 'kill-leader':
    case 'kill-follower': {
      const leader = await cl.leader();
      const followers = cl.nodes.filter((n) => n !== leader && n.process.alive);
      const n = plan.kind === 'kill-leader' ? (leader ?? cl.nodes[p % 3]!) : (followers[p % Math.max(1, followers.length)] ?? cl.nodes[p % 3]!);
      const f = record(n.id);
      await n.process.kill('SIGKILL');
      await sleep(500 + (p % 1500));
      await restartLogged(c, f, () => cl.startNode(n));
      end(f);
      return;
    }
    case 'kill-coordinator': {
      // The coordinators live on the leader: kill it while a steal is being served, if one comes within 3 s.
      const before = await steals(cl.store.url);
      for (let i = 0; i < 60 && (await steals(cl.store.url)) === before; i++) await sleep(50);
      const n = await leaderOr(c, p);
      const f = record(n.id, 'coordinator host, during steals');
      await n.process.kill('SIGKILL');
      await sleep(800);
      await restartLogged(c, f, () => cl.startNode(n));
      end(f);
      return;
    }
    case 'kill-worker': {
      const alive = workers.filter((w) => w.alive);
      if (!alive.length) return;
      const w = alive[p % alive.length]!;
      const f = record(w.name);
      await w.kill('SIGKILL');
      await sleep(700 + (p % 1000));
      startWorker(w);
      end(f);
      return;
    }
    case 'pause-leader': {
      const n = await leaderOr(c, p);
      const f = record(n.id, `SIGSTOP for ${TTL_MS + 1_500} ms`);
      n.process.pause();
      await sleep(TTL_MS + 1_500);
      n.process.resume();
      end(f);
      return;
    }
    case 'zombie-leader': {
      // The fencing-token story: a paused leader is declared dead and replaced under the same node
      // id; another node leads meanwhile and dies; the replacement takes the lease at a later epoch;
      // then the paused process resumes with whatever it was about to write under the old epoch.
      // Caught with a fenced transition on the wire (its link holds it), then paused: the write
      // arrives only after the replacement leads at a later epoch. If none comes within 4 s, the
      // link holds whatever is in flight then.
      // The write is a pause of a rollout no one else touches, sent to the leader itself: nothing
      // moves that row's version meanwhile, so only the fence's epoch can refuse the late write.
      const zombie = await leaderOr(c, p);
      const f = record(zombie.id, 'a fenced write held in the network, paused, replaced under its id, resumed');
      let fallback: NodeJS.Timeout | undefined;
      const held = zombie.link.holdAt(['rollout_apply', c.quiet]);
      // No Idempotency-Key: with one, the write would run inside a transaction that PostgreSQL ends
      // after one TTL idle (the node's idle_in_transaction_session_timeout), a second line of defence.
      const pause = call(c, {
        client: 'operator',
        kind: 'rollout.pause',
        base: zombie.url,
        via: zombie.id,
        method: 'POST',
        path: `/rollouts/${c.quiet}/pause`,
        body: { reason: 'zombie' },
        target: c.quiet,
      });
      await Promise.race([held, new Promise<void>((r) => (fallback = setTimeout(() => r(zombie.link.hold(true)), 4_000)))]);
      clearTimeout(fallback);
      zombie.process.pause();
      const other = async (): Promise<ClusterNode | null> => {
        for (let i = 0; i < 80; i++) {
          const l = await cl.leader();
          if (l && l.id !== zombie.id) return l;
          await sleep(100);
        }
        return null;
      };
      const next = await other();
      let replacement: ManagedProcess | null = null;
      try {
        replacement = await cl.replacement(zombie);
      } catch (err) {
        c.log(`[chaos] replacement of ${zombie.id} failed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
      }
      // The third node is cut off from the store meanwhile, so the lease goes to the replacement.
      const third = cl.nodes.find((n) => n !== zombie && n !== next) ?? null;
      third?.link.blackhole(true);
      if (next) {
        await next.process.kill('SIGKILL');
        for (let i = 0; i < 80 && (await cl.leader())?.id === next.id; i++) await sleep(100);
      }
      third?.link.blackhole(false);
      zombie.link.hold(false);
      zombie.process.resume();
      await Promise.race([pause, sleep(1_500)]);
      await replacement?.kill('SIGKILL');
      if (next) await restartLogged(c, f, () => cl.startNode(next));
      end(f);
      return;
    }
    case 'slow-promotion': {
      // A promotion overtaken: the leader promotes a rollout on a healthy reading, and that write (and
      // any other promotion of it for a while) is slowed on its own connection; a breach arriving
      // meanwhile is rolled back over another connection, then the promotion arrives. Only the exact
      // state the promotion was evaluated on (its version) can refuse it.
      const leader = await leaderOr(c, p);
      const f = record(leader.id, 'a promotion slowed 2 s on its connection while a breach rolls the stage back');
      let caught = false;
      const slowed = leader.link.slowAt(['rollout_apply', c.slow, '"promoted"'], 2_000, 1_500).then(() => (caught = true));
      const reading = (errors: number) => ({
        type: 'rollout.metrics_reported',
        rolloutId: c.slow,
        stage: 0,
        requests: 100,
        errors,
        p99LatencyMs: 50,
        observedAt: Date.now(),
      });
      const send = (errors: number) =>
        call(c, {
          client: 'signals-S',
          kind: 'signal.metrics',
          base: leader.url,
          via: leader.id,
          method: 'POST',
          path: '/events',
          body: reading(errors),
          target: c.slow,
        });
      // Healthy readings until one's promotion is caught (its answer waits for the slowed write: not awaited).
      const pending: Promise<unknown>[] = [];
      for (let i = 0; i < 20 && !caught; i++) {
        pending.push(send(0));
        await Promise.race([slowed, sleep(200)]);
      }
      // Then breaches, while the promotion is on its way.
      for (let i = 0; caught && i < 10; i++) {
        await send(40);
        await sleep(50);
      }
      await Promise.all(pending);
      end(f);
      return;
    }
    case 'restart-leader': {
      const n = await leaderOr(c, p);
      const f = record(n.id, 'SIGTERM, then start');
      await n.process.kill('SIGTERM');
      await restartLogged(c, f, () => cl.startNode(n));
      end(f);
      return;
    }
    case 'store-restart': {
      const f = record('store');
      await cl.store.stop();
      await sleep(500 + (p % 1000));
      await restartLogged(c, f, () => cl.store.start());
      end(f);
      return;
    }
    case 'store-blackhole':
    case 'store-delay':
    case 'store-lose-replies': {
      const n = p % 2 === 0 ? await leaderOr(c, p) : cl.nodes[p % cl.nodes.length]!;
      const ms = plan.kind === 'store-blackhole' ? TTL_MS + 1_000 : plan.kind === 'store-delay' ? 2_500 : 1_500;
      const delay = 200 + (p % 1300);
      const f = record(`${n.id}→store`, plan.kind === 'store-delay' ? `${delay} ms each way for ${ms} ms` : `${ms} ms`);
      if (plan.kind === 'store-blackhole') n.link.blackhole(true);
      else if (plan.kind === 'store-delay') n.link.delay(delay);
      else n.link.loseReplies(true);
      await sleep(ms);
      n.link.blackhole(false);
      n.link.delay(0);
      n.link.loseReplies(false);
      end(f);
      return;
    }
    case 'clock-offset': {
      // One node and one worker run with their wall clocks off by more than the skew margin.
      const n = cl.nodes[p % cl.nodes.length]!;
      const alive = workers.filter((w) => w.alive);
      const w = alive.length ? alive[p % alive.length]! : null;
      const offset = (p % 2 === 0 ? 1 : -1) * (1_500 + (p % 2_500));
      const f = record(`${n.id}${w ? ` and ${w.name}` : ''}`, `${offset} ms`);
      n.process.clockOffsetMs = offset;
      await n.process.kill('SIGTERM');
      await restartLogged(c, f, () => cl.startNode(n));
      if (w) {
        w.clockOffsetMs = offset;
        await w.kill('SIGTERM');
        startWorker(w);
      }
      await sleep(3_000);
      n.process.clockOffsetMs = 0;
      await n.process.kill('SIGTERM');
      await restartLogged(c, f, () => cl.startNode(n));
      if (w) {
        w.clockOffsetMs = 0;
        await w.kill('SIGTERM');
        startWorker(w);
      }
      end(f);
      return;
    }
    case 'signals-duplicated':
    case 'signals-reordered':
    case 'signals-late': {
      const f = record('signals');
      const mode = plan.kind === 'signals-duplicated' ? 'duplicated' : plan.kind === 'signals-reordered' ? 'reordered' : 'late';
      c.signals[mode] = true;
      await sleep(2_500);
      c.signals[mode] = false;
      end(f);
      return;
    }
    case 'target-outside-writer': {
      // A person edits a running rollout's split by hand, keeping our stamp line: drift. The rollout must
      // be paused, naming the target, and the edit left as it is. Not the rollout people command: a
      // command takes a target back by design.
      const running = new Set(
        await sqlRows(cl.store.url, "SELECT id AS v FROM rollouts WHERE id = ANY($1::text[]) AND state = 'running'", [[...c.targetOf.keys()]]),
      );
      const candidates = [...c.targetOf].filter(([id, t]) => {
        const s = c.sampler.latest(t);
        return running.has(id) && id !== c.manual && s?.stamp?.rolloutId === id && s.percent > 0 && s.percent < 100 && !s.final;
      });
      const chosen = candidates[p % Math.max(1, candidates.length)];
      if (!chosen) {
        end(record('targets', 'no running rollout had a split on its target'));
        return;
      }
      const [id, target] = chosen;
      const from = c.sampler.latest(target)!.percent;
      const to = from >= 50 ? from - 20 : from + 20;
      const f = record(target, `${id}'s split edited by hand, ${from}% → ${to}%, its stamp line kept`);
      c.edits.push(cl.targets.edit(target, to, c.epochMs));
      // A tick notices it.
      await sleep(2_000);
      end(f);
      return;
    }
    case 'pause-mid-actuation': {
      // A leader stopped in the middle of an actuation, its write landing after a newer leader's: the
      // leader's write to the actuation rollout's target is held in the gate (its fenced "pending"
      // record is committed by then), and the leader paused; a newer leader converges the target at
      // its epoch and rolls the rollout back; then the old process resumes and its write goes on.
      // Only the stamp's re-read before the write can refuse it.
      const target = c.targetOf.get(c.act)!;
      const leader = await leaderOr(c, p);
      const pid = leader.process.child?.pid;
      const f = record(leader.id, `its write to ${target} held, SIGSTOP, let go once a newer leader has written ${target} and rolled ${c.act} back`);
      const epoch = await sqlValue(cl.store.url, "SELECT epoch AS v FROM leases WHERE name = 'promotion_leader'");
      if (pid === undefined || !Number.isFinite(epoch)) {
        end(f);
        return;
      }
      const pending: Promise<unknown>[] = [];
      cl.targets.gate.hold(pid, target);
      // Healthy readings, straight to the leader: the promotion they bring activates the next stage, whose write is held.
      for (let i = 0; i < 40 && !cl.targets.gate.held(pid); i++) {
        const stage = await activeStage(c, c.act, leader);
        if (stage !== null && stage >= 0) pending.push(reading(c, c.act, leader, stage, 0));
        await sleep(150);
      }
      if (!cl.targets.gate.held(pid)) {
        cl.targets.gate.clear();
        c.log(`[chaos] pause-mid-actuation: no write of ${leader.id} to ${target} came`);
        await Promise.all(pending);
        end(f);
        return;
      }
      leader.process.pause();
      const newer = () => (c.sampler.latest(target)?.stamp?.epoch ?? -1) > epoch;
      await waitUntil(() => newer(), TTL_MS + 6_000);
      // Rolled back under the newer leader: breaching readings of the active stage, to whoever leads now.
      await waitUntil(async () => {
        const lead = (await cl.leader()) ?? cl.nodes.find((n) => n !== leader)!;
        const stage = lead === leader ? null : await activeStage(c, c.act, lead);
        if (stage !== null && stage >= 0) pending.push(reading(c, c.act, lead, stage, 40));
        return (
          newer() &&
          c.sampler.latest(target)?.percent === 0 &&
          (await sqlValue(cl.store.url, "SELECT count(*) AS v FROM rollouts WHERE id = $1 AND state = 'rolled_back'", [c.act])) === 1
        );
      }, 6_000);
      leader.process.resume();
      await sleep(300);
      cl.targets.gate.clear();
      // The held write lands now, or is refused.
      await sleep(1_500);
      await Promise.all(pending);
      end(f);
      return;
    }
    case 'target-write-delayed': {
      // Every target write starts late; the actuation rollout is driven through its stages meanwhile (and,
      // every other time, breached on its second), so commits run ahead of the writes that carry them out.
      const ms = 800 + (p % 1_200);
      const breach = p % 2 === 1;
      const f = record('target writes', `each ${ms} ms late while ${c.act} is driven ${breach ? 'to its second stage and breached' : 'to completion'}`);
      cl.targets.gate.delay(ms);
      const pending: Promise<unknown>[] = [];
      for (const stop = now(c) + 6_000; now(c) < stop;) {
        const node = await leaderOr(c, p);
        const stage = await activeStage(c, c.act, node);
        if (stage === -1) break;
        if (stage !== null) pending.push(reading(c, c.act, node, stage, breach && stage >= 1 ? 40 : 0));
        await sleep(250);
      }
      cl.targets.gate.clear();
      await Promise.all(pending);
      end(f);
      return;
    }
    default:
      throw new Error(`the local topology has no ${plan.kind} fault`);
  }
}

/** The rollout's active stage as `node` answers: its index, null when it has none or no answer came, -1 once it has ended. */
async function activeStage(c: Ctx, id: string, node: ClusterNode): Promise<number | null> {
  const read = await call(c, { client: 'signals-T', kind: 'read.rollout', base: node.url, via: node.id, method: 'GET', path: `/rollouts/${id}`, target: id });
  const view = read.result as { state?: string; stages?: { index?: number; phase?: string }[] } | undefined;
  if (view?.state && ['completed', 'rolled_back', 'aborted'].includes(view.state)) return -1;
  const active = view?.state === 'running' ? view.stages?.find((s) => s.phase === 'active') : undefined;
  return typeof active?.index === 'number' ? active.index : null;
}

/** A metrics reading of one stage, to one node. */
function reading(c: Ctx, id: string, node: ClusterNode, stage: number, errors: number): Promise<Op> {
  const body = { type: 'rollout.metrics_reported', rolloutId: id, stage, requests: 100, errors, p99LatencyMs: 50, observedAt: Date.now() };
  return call(c, { client: 'signals-T', kind: 'signal.metrics', base: node.url, via: node.id, method: 'POST', path: '/events', body, target: id });
}

async function waitUntil(done: () => boolean | Promise<boolean>, ms: number, everyMs = 200): Promise<boolean> {
  const stop = performance.now() + ms;
  while (performance.now() < stop) {
    if (await done()) return true;
    await sleep(everyMs);
  }
  return false;
}

async function steals(url: string): Promise<number> {
  return sqlValue(url, 'SELECT coalesce(sum(steals), 0) AS v FROM run_stats');
}

async function sqlRows(url: string, text: string, params: unknown[] = []): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.query<{ v: string }>(text, params)).rows.map((r) => r.v);
  } catch {
    return [];
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function sqlValue(url: string, text: string, params: unknown[] = []): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ v: string | number }>(text, params);
    return Number(rows[0]?.v ?? 0);
  } catch {
    return NaN;
  } finally {
    await client.end().catch(() => undefined);
  }
}

// ── one schedule ────────────────────────────────────────────────────────────

export interface ScheduleOptions {
  readonly seed: string;
  readonly schedule: number;
  readonly variant: string | null;
  readonly faultsPerSchedule: number;
  readonly items: number;
  /** Only these fault kinds (default: every kind). */
  readonly kinds?: readonly FaultKind[];
  readonly log: (line: string) => void;
}

export async function runLocalSchedule(cluster: ChaosCluster, o: ScheduleOptions): Promise<ChaosHistory> {
  const epochMs = wall();
  const mark = await auditMark(cluster.store.url);
  const rng = new Rng(`${o.seed}/${o.schedule}/workload`);
  const tag = `s${o.seed}-${o.schedule}`.replace(/[^A-Za-z0-9_-]/g, '');
  const ids = {
    healthy: `${tag}-A`,
    breach: `${tag}-B`,
    manual: `${tag}-C`,
    late: `${tag}-D`,
    racer1: `${tag}-E`,
    racer2: `${tag}-F`,
    racer3: `${tag}-G`,
    racer4: `${tag}-H`,
    quiet: `${tag}-Q`,
    slow: `${tag}-S`,
    act: `${tag}-T`,
    // Judged gates (judged.ts): as good as the stable version, or worse; nothing but their gates moves them.
    judgedJ: `${tag}-J`,
    judgedK: `${tag}-K`,
    judgedL: `${tag}-L`,
    judgedM: `${tag}-M`,
  };
  // Most rollouts move a target of their own; three racers and the quiet one move none, as before targets existed.
  const targetOf = new Map<string, TargetName>([
    [ids.healthy, 'web'],
    [ids.breach, 'web-b'],
    [ids.manual, 'web-c'],
    [ids.late, 'web-d'],
    [ids.racer1, 'web-e'],
    [ids.slow, 'web-s'],
    [ids.act, 'web-t'],
  ]);
  const sampler = cluster.targets.sample(epochMs);
  const watch = new StallWatch();
  const c: Ctx = {
    cluster,
    watch,
    epochMs,
    ops: [],
    faults: [],
    rng,
    signals: { duplicated: false, reordered: false, late: false },
    nextOp: 0,
    stopping: false,
    quiet: ids.quiet,
    slow: ids.slow,
    act: ids.act,
    manual: ids.manual,
    targetOf,
    sampler,
    edits: [],
    log: o.log,
  };
  try {
    const h = await schedule(c, o, { ids, tag, mark });
    await retire(c);
    return h;
  } finally {
    watch.close();
    await sampler.stop();
  }
}

async function schedule(
  c: Ctx,
  o: ScheduleOptions,
  {
    ids,
    tag,
    mark,
  }: {
    ids: Record<
      | 'healthy'
      | 'breach'
      | 'manual'
      | 'late'
      | 'racer1'
      | 'racer2'
      | 'racer3'
      | 'racer4'
      | 'quiet'
      | 'slow'
      | 'act'
      | 'judgedJ'
      | 'judgedK'
      | 'judgedL'
      | 'judgedM',
      string
    >;
    tag: string;
    mark: number;
  },
): Promise<ChaosHistory> {
  const { cluster, epochMs, rng } = c;
  const runId = `${tag}-run`;

  const create = (id: string, expect: 'promote' | 'rollback' | 'any') =>
    call(c, {
      client: 'creator',
      kind: 'rollout.create',
      base: cluster.nginxUrl,
      via: 'nginx',
      method: 'POST',
      path: '/rollouts',
      body: { id, spec: rolloutSpec(`${id}-key`, expect, c.targetOf.get(id)) },
      key: `${id}-key`,
      target: id,
      retries: 10,
    });
  await create(ids.healthy, 'promote');
  await create(ids.breach, 'rollback');
  await create(ids.manual, 'any');
  // Breaches at a random moment: some land while a tick is evaluating an older, healthy reading.
  for (const racer of [ids.racer1, ids.racer2, ids.racer3, ids.racer4]) await create(racer, 'rollback');
  await create(ids.quiet, 'any');
  await create(ids.slow, 'any');
  await create(ids.act, 'any');
  const judgedIds: Record<JudgedKind, string> = { 'mw-same': ids.judgedJ, 'mw-slow': ids.judgedK, 'seq-same': ids.judgedL, 'seq-bad': ids.judgedM };
  for (const kind of JUDGED_KINDS) {
    const id = judgedIds[kind];
    await call(c, {
      client: 'creator',
      kind: 'rollout.create',
      base: cluster.nginxUrl,
      via: 'nginx',
      method: 'POST',
      path: '/rollouts',
      body: { id, spec: judgedSpec(kind, `${id}-key`, cluster.prometheus!.url) },
      key: `${id}-key`,
      target: id,
      retries: 10,
    });
  }

  // A run: short items, long ones spread through it, a few poison ones.
  // Long items outlast the failure timeout and two scans: an item is judged by its heartbeats, never by
  // its age, whether it runs or waits claimed behind a long one. Spread through the run (one in 20),
  // they keep every worker busy until its end, so items wait claimed behind them while the queue is
  // still full: no idle worker steals them first, and the last ones wait in the quiet period, when
  // no fault excuses a taken item.
  const items = Array.from({ length: o.items }, (_, n) => ({ n, tag, ms: n % 20 === 5 ? LONG_ITEM_MS : 5 + rng.int(25), poison: n % 53 === 7 }));
  const runOp = await call(c, {
    client: 'creator',
    kind: 'run.create',
    base: cluster.nginxUrl,
    via: 'nginx',
    method: 'POST',
    path: '/runs',
    body: { id: runId, items },
    key: `${runId}-key`,
    target: runId,
    retries: 10,
  });
  runOp.result = { ...runOp.result, items: items.length };

  // Two workers start their items one at a time: items wait claimed behind their long ones. The
  // third keeps the default budget, so whole batches are started and run as one chunk.
  const workers = [1, 2, 3].map((i) => cluster.worker(runId, `${tag}-w${i}`, i === 2 ? {} : { chunkBudgetMs: 1 }));
  const startWorker = (w: ManagedProcess) => w.start();
  for (const w of workers) startWorker(w);

  const loops = [
    signalLoop(c, ids.healthy, null),
    signalLoop(c, ids.breach, 2_000),
    signalLoop(c, ids.manual, null),
    ...[ids.racer1, ids.racer2, ids.racer3, ids.racer4].map((racer) => signalLoop(c, racer, 900 + rng.int(2_500), true)),
    readerLoop(c, [`/rollouts/${ids.healthy}`, `/runs/${runId}`]),
    // Who leads, polled as a dashboard does: during an election every node answers 503.
    readerLoop(c, ['/cluster/leader']),
    commandLoop(c, ids.manual, ids.manual),
  ];

  // Faults while the workload runs.
  await sleep(800);
  const plan = planFaults(o.seed, o.schedule, o.faultsPerSchedule, o.kinds);
  o.log(`[chaos] schedule ${o.schedule} (seed ${o.seed}${o.variant ? `, variant ${o.variant}` : ''}): ${plan.map((p) => p.kind).join(', ')}`);
  for (const [i, p] of plan.entries()) {
    await inject(c, p, workers, startWorker);
    if (i === 0) {
      await create(ids.late, 'promote');
      loops.push(signalLoop(c, ids.late, null));
    }
    await sleep(300 + rng.int(700));
  }
  const faultsUntil = now(c);
  // Heal: every link whole, every process running; a node that failed to restart gets one more try.
  cluster.heal();
  for (const n of cluster.nodes)
    if (!n.process.alive) await cluster.startNode(n).catch((err: unknown) => o.log(`[chaos] ${n.id} did not come back: ${String(err).split('\n')[0]}`));
  for (const w of workers) if (!w.alive && !(w.spans.at(-1)?.end === 'exited')) startWorker(w);
  const healedAt = now(c);

  // A second, small run once the faults have healed, so items wait claimed behind a long one while
  // no fault excuses taking them, however fast the main run went: one worker starts them one at a
  // time, and each long item keeps the four others of its batch waiting past the failure timeout.
  const quietRunId = `${tag}-quiet`;
  const quietItems = Array.from({ length: 10 }, (_, i) => ({ n: QUIET_RUN_FIRST_N + i, tag, ms: i % 5 === 0 ? LONG_ITEM_MS : 10, poison: false }));
  const quietOp = await call(c, {
    client: 'creator',
    kind: 'run.create',
    base: cluster.nginxUrl,
    via: 'nginx',
    method: 'POST',
    path: '/runs',
    body: { id: quietRunId, items: quietItems },
    key: `${quietRunId}-key`,
    target: quietRunId,
    retries: 10,
  });
  quietOp.result = { ...quietOp.result, items: quietItems.length };
  const quietWorker = cluster.worker(quietRunId, `${tag}-w4`, { chunkBudgetMs: 1 });
  workers.push(quietWorker);
  startWorker(quietWorker);
  const runIds = [runId, quietRunId];

  // Quiet: the workload goes on without faults until the runs and rollouts settle, or the bound passes.
  const settled = async () => {
    const open = await sqlValue(cluster.store.url, "SELECT count(*) AS v FROM work_items WHERE run_id = ANY($1::text[]) AND state IN ('pending', 'running')", [
      runIds,
    ]);
    const running = await sqlValue(cluster.store.url, "SELECT count(*) AS v FROM rollouts WHERE id = ANY($1::text[]) AND state = 'running'", [
      [ids.healthy, ids.breach, ids.late, ids.racer1, ids.racer2, ids.racer3, ids.racer4, ids.judgedJ, ids.judgedK, ids.judgedL, ids.judgedM],
    ]);
    return open === 0 && running === 0;
  };
  // At least the leader bound, so the checker can judge leadership after healing. On a busy host the
  // bound stretches by what the processes were stalled since (as the checker's bounds do), up to twice.
  const stalls = () => [...cluster.stalls(epochMs), ...onScheduleClock(c.watch.read(), epochMs)];
  const quietFor = () =>
    QUIET_MAX_MS +
    Math.min(QUIET_MAX_MS, worstStall(stalls(), [...cluster.nodes.map((n) => n.id), ...workers.map((w) => w.name), 'harness'], healedAt, now(c)).ms);
  while (now(c) - healedAt < quietFor() && !(now(c) - healedAt >= LEADER_WITHIN_MS && (await settled()))) await sleep(250);
  // A little longer, so a late wrong move (a promotion after a rollback, a second result) has time to show.
  await sleep(1_000);
  const quietUntil = now(c);
  c.stopping = true;
  await Promise.race([Promise.all(loops), sleep(25_000)]);
  for (const w of workers) await w.kill('SIGKILL');
  // Targets are judged once the faults have healed by a leader's bound, a tick and a write: read them that long at least.
  const judged = healedAt + LEADER_WITHIN_MS + TIMINGS.tickS * 1000 + WRITE_SLACK_MS + 500;
  if (now(c) < judged) await sleep(judged - now(c));
  await c.sampler.stop();

  const executions = cluster.backend.executions.splice(0);
  const store = await dumpStore(cluster.store.url, { fromSeq: mark, epochMs, rollouts: Object.values(ids), runs: runIds });
  // The backend's own record of executions: which item failed, as the backend (not the worker) says.
  const itemIdOf = await itemIds(cluster.store.url, runIds);
  for (const e of executions) {
    const target = itemIdOf.get(e.n);
    if (target === undefined || e.startedAt < epochMs) continue;
    c.ops.push({
      id: c.nextOp++,
      client: 'backend',
      kind: 'backend.execute',
      via: 'backend',
      target,
      invokedAt: e.startedAt - epochMs,
      completedAt: e.endedAt === null ? null : e.endedAt - epochMs,
      outcome: e.ok === null ? 'unknown' : e.ok ? 'ok' : 'failed',
    });
  }
  return {
    topology: 'local',
    seed: o.seed,
    schedule: o.schedule,
    variant: o.variant,
    epochMs,
    nodes: cluster.nodes.map((n) => n.id),
    workers: workers.map((w) => w.name),
    ops: c.ops,
    faults: c.faults,
    processes: cluster.spans(epochMs).filter((s) => s.role !== 'worker' || workers.some((w) => w.name === s.process)),
    stalls: stalls(),
    phases: { faultsUntil, healedAt, quietUntil },
    bounds: { leaderWithinMs: LEADER_WITHIN_MS, runsFinishWithinMs: RUNS_FINISH_WITHIN_MS, failureTimeoutMs: TTL_MS, heartbeatMs: WORKER_HEARTBEAT_MS },
    store,
    targets: {
      samples: c.sampler.samples,
      edits: c.edits,
      checks: cluster.targets.gate.checks().flatMap((x) => (x.at >= epochMs ? [{ ...x, at: x.at - epochMs }] : [])),
      tickMs: TIMINGS.tickS * 1000,
      writeSlackMs: WRITE_SLACK_MS,
    },
  };
}

/**
 * Between schedules, as an operator would: every rollout of the schedule
 * that moves a target is ended (aborted if it has not ended), its target let
 * settle, then every include is put back at rest: a completed rollout leaves
 * its target final, and a drifted one as the person left it, and the next
 * schedule's rollout would find either taken.
 */
async function retire(c: Ctx): Promise<void> {
  const ids = [...c.targetOf.keys()];
  const url = c.cluster.store.url;
  const settled = await waitUntil(
    async () => {
      const open = await sqlRows(url, "SELECT id AS v FROM rollouts WHERE id = ANY($1::text[]) AND state NOT IN ('completed', 'rolled_back', 'aborted')", [
        ids,
      ]);
      for (const id of open) {
        await fetch(`${c.cluster.nginxUrl}/rollouts/${id}/abort`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-rollout-actor': 'operator' },
          body: JSON.stringify({ reason: 'schedule over' }),
          signal: AbortSignal.timeout(5_000),
        })
          .then((r) => r.text())
          .catch(() => undefined);
      }
      return (
        open.length === 0 &&
        (await sqlValue(url, 'SELECT count(*) AS v FROM rollout_actuations WHERE rollout_id = ANY($1::text[]) AND NOT settled', [ids])) === 0
      );
    },
    30_000,
    500,
  );
  if (!settled) c.log("[chaos] the schedule's rollouts did not all end and settle their targets within 30 s; targets reset anyway");
  c.cluster.targets.reset();
  c.cluster.targets.gate.clearChecks();
}

/** Item ids by payload `n` (unique across a schedule's runs). */
async function itemIds(url: string, runIds: readonly string[]): Promise<Map<number, string>> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string; n: number }>("SELECT id, (payload->>'n')::int AS n FROM work_items WHERE run_id = ANY($1::text[])", [
      runIds,
    ]);
    return new Map(rows.map((r) => [Number(r.n), r.id]));
  } finally {
    await client.end().catch(() => undefined);
  }
}
