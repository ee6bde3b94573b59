/**
 * A small hand-made schedule, for the timeline's tests and for working on the
 * picture (`node --import tsx test/chaos/timeline-cli.ts --fixture`):
 *
 *   - node-1 leads at epoch 0 until the nemesis kills it at 20 s; its lease
 *     expires at 23.5 s and node-2 takes it at epoch 1 (24.6 s);
 *   - node-2 is cut off from the store from 31 s to 37 s, its lease expires at
 *     35.6 s and node-3 takes it at epoch 2 (36.7 s);
 *   - under the broken variant `lease-row-reset`, node-3 "releases" at 50 s by
 *     deleting the row and node-1 re-creates it at epoch 0 (51 s): the one
 *     violation;
 *   - rollout checkout-v2 promotes two stages (12 s, 28 s), search-v5 rolls
 *     back (42 s);
 *   - run nightly-batch completes 48 of 50 items and fails 2, none while the
 *     store was cut off;
 *   - a read through nginx gets no answer while the leader is dead, and a
 *     pause is refused while the store is cut off.
 */
import type { ChaosHistory, FencedWrite, ItemTransition, LeaseChange, Op, StageTransition, Violation } from './history.js';

const TTL = 5_000;
const RENEW_EVERY = 2_000;

export const FIXTURE = {
  nodes: ['node-1', 'node-2', 'node-3'],
  workers: ['worker-1', 'worker-2'],
  run: 'nightly-batch',
  items: 50,
  failedItems: ['item-17', 'item-33'],
  promotions: 2,
  rollbacks: 1,
  faults: 2,
  failedOps: 1,
  unknownOps: 1,
  violations: 1,
  /** The terms of promotion_leader, as the timeline should read them. */
  terms: [
    { holder: 'node-1', epoch: 0, from: 500, to: 23_500, end: 'expired', anomaly: null },
    { holder: 'node-2', epoch: 1, from: 24_600, to: 35_600, end: 'expired', anomaly: null },
    { holder: 'node-3', epoch: 2, from: 36_700, to: 50_000, end: 'deleted', anomaly: null },
    { holder: 'node-1', epoch: 0, from: 51_000, to: 60_000, end: 'open', anomaly: 'backwards' },
  ],
} as const;

function leaseChanges(): LeaseChange[] {
  const out: LeaseChange[] = [];
  const push = (at: number, change: LeaseChange['change'], holder: string | null, epoch: number, expiresAt: number | null) =>
    out.push({ seq: out.length + 1, at, name: 'promotion_leader', change, holder, epoch, expiresAt });
  const hold = (holder: string, epoch: number, from: number, lastRenewal: number, first: LeaseChange['change']) => {
    push(from, first, holder, epoch, from + TTL);
    for (let t = from + RENEW_EVERY; t <= lastRenewal; t += RENEW_EVERY) push(t, 'update', holder, epoch, t + TTL);
  };
  hold('node-1', 0, 500, 18_500, 'insert'); // killed at 20 s: 18.5 s was its last renewal
  hold('node-2', 1, 24_600, 30_600, 'update'); // cut off from the store at 31 s
  hold('node-3', 2, 36_700, 48_700, 'update');
  push(50_000, 'delete', 'node-3', 2, 53_700);
  hold('node-1', 0, 51_000, 59_000, 'insert');
  return out;
}

function stageTransitions(): StageTransition[] {
  const rows: Omit<StageTransition, 'seq'>[] = [
    { at: 1_200, rolloutId: 'checkout-v2', attempt: 1, index: 0, from: 'pending', to: 'active', epoch: 0, by: 'node-1' },
    { at: 3_000, rolloutId: 'search-v5', attempt: 1, index: 0, from: 'pending', to: 'active', epoch: 0, by: 'node-1' },
    { at: 12_000, rolloutId: 'checkout-v2', attempt: 1, index: 0, from: 'active', to: 'promoted', epoch: 0, by: 'node-1' },
    { at: 12_000, rolloutId: 'checkout-v2', attempt: 1, index: 1, from: 'pending', to: 'active', epoch: 0, by: 'node-1' },
    { at: 28_000, rolloutId: 'checkout-v2', attempt: 1, index: 1, from: 'active', to: 'promoted', epoch: 1, by: 'node-2' },
    { at: 28_000, rolloutId: 'checkout-v2', attempt: 1, index: 2, from: 'pending', to: 'active', epoch: 1, by: 'node-2' },
    { at: 42_000, rolloutId: 'search-v5', attempt: 1, index: 0, from: 'active', to: 'rolled_back', epoch: 2, by: 'node-3' },
  ];
  return rows.map((r, i) => ({ seq: i + 1, ...r }));
}

/** When item i finished: one a second from 4 s, none while the store was cut off (they land in a burst after). */
function finishedAt(i: number): number {
  const t = 4_000 + i * 1_000;
  return t >= 31_000 && t < 37_000 ? 37_200 + (t - 31_000) / 4 : t;
}

function itemTransitions(): ItemTransition[] {
  const out: Omit<ItemTransition, 'seq'>[] = [];
  for (let i = 0; i < FIXTURE.items; i++) {
    const itemId = `item-${i}`;
    const worker = FIXTURE.workers[i % 2] ?? 'worker-1';
    const end = finishedAt(i);
    const failed = (FIXTURE.failedItems as readonly string[]).includes(itemId);
    out.push({
      at: end - 800,
      runId: FIXTURE.run,
      itemId,
      from: { state: 'pending', worker: null, started: false },
      to: { state: 'running', worker, started: true, resultHash: null, error: null, attempts: 1 },
    });
    out.push({
      at: end,
      runId: FIXTURE.run,
      itemId,
      from: { state: 'running', worker, started: true },
      to: failed
        ? {
            state: 'failed',
            worker,
            started: true,
            resultHash: null,
            error: itemId === 'item-17' ? 'exit 137 on every attempt' : 'poison: 3 failures',
            attempts: 3,
          }
        : { state: 'done', worker, started: true, resultHash: `sha256:${(i * 2654435761).toString(16).padStart(8, '0')}`, error: null, attempts: 1 },
    });
  }
  return out.sort((a, b) => a.at - b.at).map((t, i) => ({ seq: i + 1, ...t }));
}

function ops(): Op[] {
  const out: Op[] = [];
  const add = (o: Omit<Op, 'id'>) => out.push({ id: out.length + 1, ...o });
  add({
    client: 'rollouts-1',
    kind: 'rollout.create',
    via: 'nginx',
    target: 'checkout-v2',
    key: 'k-create-1',
    invokedAt: 800,
    completedAt: 1_150,
    outcome: 'ok',
    status: 201,
    node: 'node-1',
    result: { id: 'checkout-v2', created: true },
  });
  add({
    client: 'rollouts-1',
    kind: 'rollout.create',
    via: 'nginx',
    target: 'search-v5',
    key: 'k-create-2',
    invokedAt: 2_600,
    completedAt: 2_900,
    outcome: 'ok',
    status: 201,
    node: 'node-1',
    result: { id: 'search-v5', created: true },
  });
  for (let t = 5_000; t < 60_000; t += 5_000) {
    const down = t >= 31_000 && t < 37_000;
    add({
      client: 'signals',
      kind: 'signal.metrics',
      via: 'nginx',
      target: 'checkout-v2',
      invokedAt: t,
      completedAt: t + (down ? 900 : 40),
      outcome: 'ok',
      status: 202,
      node: t < 24_600 ? 'node-1' : 'node-3',
    });
  }
  add({
    client: 'rollouts-1',
    kind: 'rollout.pause',
    via: 'nginx',
    target: 'search-v5',
    key: 'k-pause-1',
    invokedAt: 33_000,
    completedAt: 33_600,
    outcome: 'failed',
    status: 503,
    node: 'node-3',
    detail: 'store unavailable, retry after 1 s',
  });
  for (let t = 500; t < 60_000; t += 1_000) {
    if (t === 21_500) {
      add({
        client: 'reader-nginx',
        kind: 'read.rollout',
        via: 'nginx',
        target: 'checkout-v2',
        invokedAt: t,
        completedAt: t + 2_000,
        outcome: 'unknown',
        status: 504,
        detail: 'nginx: upstream timed out (node-1 was dead)',
      });
      continue;
    }
    const node = FIXTURE.nodes[Math.floor(t / 1_000) % 3] ?? 'node-2';
    add({
      client: 'reader-nginx',
      kind: 'read.rollout',
      via: 'nginx',
      target: 'checkout-v2',
      invokedAt: t,
      completedAt: t + 25,
      outcome: 'ok',
      status: 200,
      node,
    });
  }
  return out.sort((a, b) => a.invokedAt - b.invokedAt);
}

function writes(stages: readonly StageTransition[]): FencedWrite[] {
  return stages
    .filter((t) => t.to === 'promoted' || t.to === 'rolled_back')
    .map((t, i) => ({
      seq: i + 1,
      at: t.at,
      table: 'rollout_stages',
      key: `${t.rolloutId}/${t.attempt}/${t.index}`,
      lease: 'promotion_leader',
      current: { holder: t.by, epoch: t.epoch ?? 0 },
      claimed: { holder: t.by, epoch: t.epoch ?? 0 },
      before: { phase: t.from },
      after: { phase: t.to, promoted_by: t.by, promoted_epoch: t.epoch },
    }));
}

export function fixtureHistory(): { history: ChaosHistory; violations: Violation[] } {
  const changes = leaseChanges();
  const stages = stageTransitions();
  const items = itemTransitions();
  const seqOf = (at: number) => changes.find((c) => c.at === at)?.seq;
  const history: ChaosHistory = {
    topology: 'local',
    seed: '0x5eed-4242',
    schedule: 7,
    variant: 'lease-row-reset',
    epochMs: 1_790_000_000_000,
    nodes: FIXTURE.nodes,
    workers: FIXTURE.workers,
    ops: ops(),
    faults: [
      { kind: 'kill-leader', target: 'node-1', startAt: 20_000, endAt: 26_000, detail: 'SIGKILL; restarted at 26 s' },
      { kind: 'store-blackhole', target: 'node-2→store', startAt: 31_000, endAt: 37_000, detail: 'packets dropped both ways' },
    ],
    processes: [
      { process: 'node-1', role: 'node', from: 0, to: 20_000, end: 'killed' },
      { process: 'node-1', role: 'node', from: 26_000, to: null },
      { process: 'node-2', role: 'node', from: 0, to: null },
      { process: 'node-3', role: 'node', from: 0, to: null },
      { process: 'worker-1', role: 'worker', from: 0, to: null },
      { process: 'worker-2', role: 'worker', from: 0, to: null },
      { process: 'store', role: 'store', from: 0, to: null },
      { process: 'nginx', role: 'proxy', from: 0, to: null },
    ],
    phases: { faultsUntil: 40_000, healedAt: 41_000, quietUntil: 60_000 },
    bounds: { leaderWithinMs: 7_000, runsFinishWithinMs: 30_000, failureTimeoutMs: 6_000 },
    store: {
      leaseChanges: changes,
      writes: writes(stages),
      stageTransitions: stages,
      rolloutTransitions: [
        { seq: 1, at: 1_150, rolloutId: 'checkout-v2', from: null, to: { state: 'running', attempt: 1, reason: null, by: 'node-1' } },
        { seq: 2, at: 2_900, rolloutId: 'search-v5', from: null, to: { state: 'running', attempt: 1, reason: null, by: 'node-1' } },
        {
          seq: 3,
          at: 42_000,
          rolloutId: 'search-v5',
          from: { state: 'running', attempt: 1 },
          to: { state: 'rolled_back', attempt: 1, reason: 'gate breached: error rate 4.1% > 2%', by: 'node-3' },
        },
      ],
      itemTransitions: items,
      rollouts: [
        {
          id: 'checkout-v2',
          state: 'running',
          attempt: 1,
          reason: null,
          labels: { workload: 'k-create-1' },
          stages: [
            { attempt: 1, index: 0, name: 'canary', phase: 'promoted', promotedEpoch: 0, promotedBy: 'node-1', activatedAt: 1_200 },
            { attempt: 1, index: 1, name: 'half', phase: 'promoted', promotedEpoch: 1, promotedBy: 'node-2', activatedAt: 12_000 },
            { attempt: 1, index: 2, name: 'all', phase: 'active', promotedEpoch: null, promotedBy: null, activatedAt: 28_000 },
          ],
        },
        {
          id: 'search-v5',
          state: 'rolled_back',
          attempt: 1,
          reason: 'gate breached: error rate 4.1% > 2%',
          labels: { workload: 'k-create-2' },
          stages: [{ attempt: 1, index: 0, name: 'canary', phase: 'rolled_back', promotedEpoch: null, promotedBy: null, activatedAt: 3_000 }],
        },
      ],
      runs: [{ id: FIXTURE.run, items: FIXTURE.items }],
      items: items
        .filter((t) => t.to.state === 'done' || t.to.state === 'failed')
        .map((t) => ({
          runId: t.runId,
          id: t.itemId,
          state: t.to.state,
          worker: t.to.worker,
          resultHash: t.to.resultHash,
          error: t.to.error,
          attempts: t.to.attempts,
          hasMessage: true,
        })),
      idempotency: [
        { key: 'k-create-1', status: 201, node: 'node-1' },
        { key: 'k-create-2', status: 201, node: 'node-1' },
      ],
      events: [],
    },
  };
  const violations: Violation[] = [
    {
      invariant: 'lease-epoch-monotonic',
      kind: 'safety',
      message:
        'promotion_leader went back from epoch 2 to epoch 0: node-1 holds epoch 0 after node-3 held epoch 2, so a write fenced at epoch 0 would pass again',
      evidence: [
        `36.700 s lease promotion_leader update holder=node-3 epoch=2 (seq ${seqOf(36_700)})`,
        `50.000 s lease promotion_leader delete holder=node-3 epoch=2 (seq ${seqOf(50_000)})`,
        `51.000 s lease promotion_leader insert holder=node-1 epoch=0 (seq ${seqOf(51_000)})`,
      ],
      at: 51_000,
    },
  ];
  return { history, violations };
}
