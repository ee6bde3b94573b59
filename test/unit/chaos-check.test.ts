import { describe, expect, it } from 'vitest';
import { check, firstLeaderlessWork } from '../chaos/check.js';
import type { ChaosHistory, EventRow, LeaseChange, RolloutTransition } from '../chaos/history.js';
import { MAX_ATTEMPTS } from '../../shared/ledger/model.js';

/**
 * The checker's liveness promise for the promotion leader, on hand-made
 * histories of one AWS stack (the shape of `npm run chaos` schedule 2, seed
 * 7): the lease (TTL 5 s) is won at 14.1 s and renewed until 14.74 s, the
 * faults heal at 15 s, the quiet period lasts until 60 s, and the bound is
 * 12.5 s. Judged at 27.5 s alone, the idle stack's lapsed lease was a
 * violation; the promise is a leader whenever there is promotion work.
 */
const HOLDER = 'stack-a/us-east-1';
const TTL = 5_000; // the AWS schedules' lease

function lease(at: number, seq: number): LeaseChange {
  return { seq, at, name: 'promotion_leader', change: seq === 1 ? 'insert' : 'update', holder: HOLDER, epoch: 0, expiresAt: at + TTL };
}

function history(o: { transitions?: RolloutTransition[]; state?: string; events?: EventRow[]; renewals?: number[] }): ChaosHistory {
  const renewals = o.renewals ?? [14_100, 14_600, 14_740];
  return {
    topology: 'aws',
    seed: '7',
    schedule: 2,
    variant: null,
    epochMs: 0,
    nodes: [HOLDER],
    workers: [],
    ops: [],
    faults: [{ kind: 'store-throttle', target: 'store', startAt: 5_000, endAt: 15_000 }],
    processes: [{ process: HOLDER, role: 'lambda', from: 0, to: null }],
    phases: { faultsUntil: 15_000, healedAt: 15_000, quietUntil: 60_000 },
    bounds: { leaderWithinMs: 12_500, runsFinishWithinMs: 40_000, failureTimeoutMs: 10_000 },
    store: {
      leaseChanges: renewals.map((at, i) => lease(at, i + 1)),
      writes: [],
      stageTransitions: [],
      rolloutTransitions: o.transitions ?? [
        { seq: 1, at: 2_000, rolloutId: 'r1', from: null, to: { state: 'running', attempt: 1, reason: null, by: HOLDER } },
        {
          seq: 2,
          at: 14_756,
          rolloutId: 'r1',
          from: { state: 'running', attempt: 1 },
          to: { state: 'rolled_back', attempt: 1, reason: 'gate breached', by: HOLDER },
        },
      ],
      itemTransitions: [],
      rollouts: [{ id: 'r1', state: o.state ?? 'rolled_back', attempt: 1, reason: null, labels: {}, stages: [] }],
      runs: [],
      items: [],
      idempotency: [],
      events: o.events ?? [{ seq: 1, rolloutId: 'r1', detailType: 'ai.rollout.rollback_detected', detail: {}, at: 14_756, publishedAt: 14_760 }],
    },
  };
}

const leaderViolations = (h: ChaosHistory) => check(h).filter((v) => v.invariant === 'leader-after-heal');

describe('leader-after-heal: a live leader within the bound whenever there is promotion work', () => {
  it('an idle AWS stack passes: no rollout running and the outbox empty after the heal, so nothing campaigns and the lease lapses', () => {
    expect(leaderViolations(history({}))).toEqual([]);
  });

  it('a rollout still running with no leader after its lease lapsed fails, naming the rollout', () => {
    const running = history({
      state: 'running',
      transitions: [{ seq: 1, at: 2_000, rolloutId: 'r1', from: null, to: { state: 'running', attempt: 1, reason: null, by: HOLDER } }],
      events: [],
    });
    const found = leaderViolations(running);
    expect(found).toHaveLength(1);
    // The last renewal's lease (19.74 s) plus the clock slack (5 s): the first moment from which no leader comes within the bound.
    expect(found[0]!.message).toMatch(/^promotion work at 24\.74s \(rollout r1 running\) and no live leader within 12\.50s/);
  });

  it('a rollout running throughout with its leader renewing passes', () => {
    const renewals = Array.from({ length: 12 }, (_, i) => 14_100 + i * 5_000);
    const running = history({
      state: 'running',
      transitions: [{ seq: 1, at: 2_000, rolloutId: 'r1', from: null, to: { state: 'running', attempt: 1, reason: null, by: HOLDER } }],
      events: [],
      renewals,
    });
    expect(leaderViolations(running)).toEqual([]);
  });

  it('an event left in the outbox is work: with no leader to publish it, the rule fails', () => {
    const stuck = history({ events: [{ seq: 1, rolloutId: 'r1', detailType: 'ai.rollout.rollback_detected', detail: {}, at: 14_756, publishedAt: null }] });
    const found = leaderViolations(stuck);
    expect(found).toHaveLength(1);
    expect(found[0]!.message).toContain('event ai.rollout.rollback_detected of r1 in the outbox');
  });

  it('work that starts late is judged from when it starts: a rollout created at 40 s with no leader after it fails', () => {
    const late = history({
      state: 'running',
      transitions: [{ seq: 1, at: 40_000, rolloutId: 'r1', from: null, to: { state: 'running', attempt: 1, reason: null, by: HOLDER } }],
      events: [],
    });
    expect(leaderViolations(late)[0]?.message).toMatch(/^promotion work at 40\.00s/);
  });
});

describe('firstLeaderlessWork', () => {
  it('a moment fails only when no leader span meets [t, t + bound]', () => {
    // Leaders over [0, 10] and [20, 30]; bound 5.
    const leaders = [
      [0, 10],
      [20, 30],
    ] as const;
    expect(firstLeaderlessWork([[0, 100]], leaders, 5, 0, 100)).toBe(10); // (10, 15) fails
    expect(firstLeaderlessWork([[0, 100]], leaders, 10, 0, 100)).toBe(30); // the gap to 20 is within the bound; after 30 none
    expect(firstLeaderlessWork([[0, 100]], leaders, 10, 0, 30)).toBeNull(); // nothing after 30 is judged
    expect(firstLeaderlessWork([[12, 14]], leaders, 5, 0, 100)).toBe(12);
    expect(firstLeaderlessWork([[16, 18]], leaders, 5, 0, 100)).toBeNull(); // 20 is within 5 of each
    expect(firstLeaderlessWork([], leaders, 5, 0, 100)).toBeNull();
    expect(firstLeaderlessWork([[0, 1]], [], 5, 0, 100)).toBe(0);
  });
});

describe('no-unclaimable-pending: an item tried MAX_ATTEMPTS times is failed, never left Pending', () => {
  const withItems = (items: ChaosHistory['store']['items']): ChaosHistory => {
    const h = history({});
    return { ...h, store: { ...h.store, runs: [{ id: 'run-1', items: items.length }], items } };
  };
  const item = (id: string, state: 'pending' | 'failed' | 'done', attempts: number, hasMessage = true) => ({
    runId: 'run-1',
    id,
    state,
    worker: null,
    resultHash: null,
    error: state === 'done' ? null : 'handler threw',
    attempts,
    hasMessage,
  });
  const found = (h: ChaosHistory) => check(h).filter((v) => v.invariant === 'no-unclaimable-pending');

  it('an item left Pending after its last attempt fails, naming its attempts and that it has no message', () => {
    const [v, ...more] = found(withItems([item('a'.repeat(64), 'pending', MAX_ATTEMPTS, false), item('b'.repeat(64), 'done', 0)]));
    expect(more).toEqual([]);
    expect(v!.message).toBe(`run run-1: 1 items Pending after ${MAX_ATTEMPTS} attempts at the end, which no worker claims and nothing failed`);
    expect(v!.evidence).toEqual([`item aaaaaaaaaaaa attempts ${MAX_ATTEMPTS}, no message; last error: handler threw`]);
  });

  it('passes when such an item was failed, or when one still Pending has attempts left', () => {
    expect(found(withItems([item('a'.repeat(64), 'failed', MAX_ATTEMPTS), item('c'.repeat(64), 'pending', MAX_ATTEMPTS - 1)]))).toEqual([]);
  });
});
