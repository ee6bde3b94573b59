import { describe, expect, it } from 'vitest';
import { check } from './check.js';
import type { ChaosHistory, FaultRecord, LeaseChange, RolloutTransition, StageTransition, TargetEdit, TargetSample, TargetStamp } from './history.js';

/**
 * The checker's actuation rules on hand-made histories: rollout r1 moves
 * target `web` (10 %, 50 %, 100 %); its first stage is committed at 1 s, the
 * second at 3 s, and it is rolled back at 5 s. The harness read `web` every
 * few tens of milliseconds; the quiet period ends at 30 s.
 */
const stamp = (stage: number | null, percent: number, epoch = 1, o: Partial<TargetStamp> = {}): TargetStamp => ({
  rolloutId: 'r1',
  attempt: 1,
  stage,
  epoch,
  percent,
  final: false,
  ...o,
});
const sample = (at: number, until: number, percent: number, s: TargetStamp | null, final = false): TargetSample => ({
  target: 'web',
  at,
  until,
  percent,
  final,
  stamp: s,
});

const CORRECT: TargetSample[] = [
  sample(0, 1_050, 0, null),
  sample(1_060, 3_040, 10, stamp(0, 10)),
  sample(3_100, 5_100, 50, stamp(1, 50)),
  sample(5_160, 30_000, 0, stamp(null, 0)),
];

function history(
  o: { samples?: TargetSample[]; edits?: TargetEdit[]; faults?: FaultRecord[]; state?: string; reason?: string | null; rollback?: boolean } = {},
): ChaosHistory {
  const rollback = o.rollback ?? true;
  const stages: StageTransition[] = [
    { seq: 2, at: 1_000, rolloutId: 'r1', attempt: 1, index: 0, from: 'pending', to: 'active', epoch: null, by: null },
    { seq: 3, at: 3_000, rolloutId: 'r1', attempt: 1, index: 0, from: 'active', to: 'promoted', epoch: 1, by: 'node-1' },
    { seq: 4, at: 3_000, rolloutId: 'r1', attempt: 1, index: 1, from: 'pending', to: 'active', epoch: null, by: null },
    ...(rollback ? [{ seq: 5, at: 5_000, rolloutId: 'r1', attempt: 1, index: 1, from: 'active', to: 'rolled_back', epoch: null, by: null } as const] : []),
  ];
  const transitions: RolloutTransition[] = [
    { seq: 1, at: 900, rolloutId: 'r1', from: null, to: { state: 'running', attempt: 1, reason: null, by: 'node-1' } },
    ...(rollback
      ? [
          {
            seq: 6,
            at: 5_000,
            rolloutId: 'r1',
            from: { state: 'running', attempt: 1 },
            to: { state: 'rolled_back', attempt: 1, reason: 'gate breached', by: 'node-1' },
          },
        ]
      : []),
  ];
  const state = o.state ?? (rollback ? 'rolled_back' : 'running');
  return {
    topology: 'local',
    seed: 'hand',
    schedule: 0,
    variant: null,
    epochMs: 0,
    nodes: ['node-1'],
    workers: [],
    ops: [],
    faults: o.faults ?? [],
    processes: [{ process: 'node-1', role: 'node', from: 0, to: null }],
    phases: { faultsUntil: 10_000, healedAt: 10_000, quietUntil: 30_000 },
    bounds: { leaderWithinMs: 4_800, runsFinishWithinMs: 30_000, failureTimeoutMs: 3_000 },
    store: {
      leaseChanges: [{ seq: 0, at: 0, name: 'promotion_leader', change: 'update', holder: 'node-1', epoch: 1, expiresAt: 40_000 }],
      writes: [],
      stageTransitions: stages,
      rolloutTransitions: transitions,
      itemTransitions: [],
      rollouts: [
        {
          id: 'r1',
          state,
          attempt: 1,
          reason: o.reason ?? null,
          labels: {},
          actuators: ['web'],
          stagePercents: [10, 50, 100],
          stages: [
            { attempt: 1, index: 0, name: 'canary', phase: 'promoted', promotedEpoch: 1, promotedBy: 'node-1', activatedAt: 1_000 },
            { attempt: 1, index: 1, name: 'half', phase: rollback ? 'rolled_back' : 'active', promotedEpoch: null, promotedBy: null, activatedAt: 3_000 },
            { attempt: 1, index: 2, name: 'all', phase: 'pending', promotedEpoch: null, promotedBy: null, activatedAt: null },
          ],
        },
      ],
      runs: [],
      items: [],
      idempotency: [],
      events: [],
    },
    targets: { samples: o.samples ?? CORRECT, edits: o.edits ?? [], tickMs: 500, writeSlackMs: 3_000 },
  };
}

const broken = (h: ChaosHistory) =>
  check(h)
    .filter((x) => x.invariant.startsWith('actuation-'))
    .map((x) => `${x.invariant}: ${x.message}`);

describe('actuation rules', () => {
  it('a target that follows its commits, and goes back to 0 after the rollback, passes', () => {
    expect(broken(history())).toEqual([]);
  });

  it('a share written before its stage was committed is ahead', () => {
    const samples = [CORRECT[0]!, sample(1_060, 2_900, 10, stamp(0, 10)), sample(2_950, 5_100, 50, stamp(1, 50)), CORRECT[3]!];
    expect(broken(history({ samples }))).toEqual([
      expect.stringMatching(
        /^actuation-never-ahead: target web carried 50% of r1 attempt 1 while its most advanced committed stage had 10%; the stage with 50% was committed 0\.05s later/,
      ),
    ]);
  });

  it('final with no committed completion is ahead', () => {
    const samples = [...CORRECT.slice(0, 3), sample(5_160, 30_000, 100, stamp(2, 100, 1, { final: true }), true)];
    expect(broken(history({ samples, rollback: false, state: 'running' }))).toContainEqual(
      expect.stringMatching(/^actuation-never-ahead: target web was final for r1 attempt 1 and its completion was never committed/),
    );
  });

  it('a target still on the new version after the rollback, past the bound, fails; within the bound it passes', () => {
    const stuck = [...CORRECT.slice(0, 2), sample(3_100, 30_000, 50, stamp(1, 50))];
    expect(broken(history({ samples: stuck }))).toEqual([
      expect.stringMatching(
        /^actuation-never-ahead: target web still carried 50% of r1 attempt 1 at 8\.50s, after its rollback at 5\.00s \(due at 0 by 8\.50s\)/,
      ),
      expect.stringMatching(/^actuation-converges: target web carries 50% .* rollout r1 is rolled_back and asks for 0%/),
    ]);
    const slow = [...CORRECT.slice(0, 2), sample(3_100, 8_000, 50, stamp(1, 50)), sample(8_060, 30_000, 0, stamp(null, 0))];
    expect(broken(history({ samples: slow }))).toEqual([]);
    // A fault under way at the rollback: the bound runs from its healing, plus the leader bound.
    const late = [...CORRECT.slice(0, 2), sample(3_100, 14_000, 50, stamp(1, 50)), sample(14_060, 30_000, 0, stamp(null, 0))];
    expect(broken(history({ samples: late, faults: [{ kind: 'kill-leader', target: 'node-1', startAt: 4_900, endAt: 6_000 }] }))).toEqual([]);
  });

  it("an older leader's stamp replacing a newer one's breaks epoch monotonicity", () => {
    const samples = [CORRECT[0]!, CORRECT[1]!, sample(3_100, 4_000, 50, stamp(1, 50, 2)), sample(4_060, 5_100, 50, stamp(1, 50, 1)), CORRECT[3]!];
    const h = history({ samples });
    const taken: LeaseChange = { seq: 9, at: 2_000, name: 'promotion_leader', change: 'update', holder: 'node-2', epoch: 2, expiresAt: 40_000 };
    expect(broken({ ...h, store: { ...h.store, leaseChanges: [...h.store.leaseChanges, taken] } })).toEqual([
      expect.stringMatching(/^actuation-epoch-monotonic: target web's stamp went back from epoch 2 to 1/),
    ]);
    // With the gate's record: a write that began its check before the newer stamp was seen is nginx's documented
    // window; one that began after it is not.
    const regressed = { ...h, store: { ...h.store, leaseChanges: [...h.store.leaseChanges, taken] } };
    const checked = (at: number) => ({ ...regressed, targets: { ...regressed.targets!, checks: [{ target: 'web', at, pid: 1, stamp: stamp(1, 50, 1) }] } });
    expect(broken(checked(3_050))).toEqual([]);
    expect(broken(checked(3_900))).toEqual([
      expect.stringMatching(
        /^actuation-epoch-monotonic: target web's stamp went back from epoch 2 to 1: .* it began its check 0\.80s after epoch 2's stamp was seen there/,
      ),
    ]);
    // An epoch no one had held yet.
    expect(broken(history({ samples: [CORRECT[0]!, CORRECT[1]!, sample(3_100, 5_100, 50, stamp(1, 50, 7)), CORRECT[3]!] }))).toContainEqual(
      expect.stringMatching(/^actuation-epoch-monotonic: target web is stamped with epoch 7, and no leader had held an epoch above 1/),
    );
  });

  it('an older stage carried out after a newer one, by the same leader, is out of commit order', () => {
    const samples = [
      CORRECT[0]!,
      CORRECT[1]!,
      sample(3_100, 4_000, 50, stamp(1, 50)),
      sample(4_060, 4_500, 10, stamp(0, 10)),
      sample(4_560, 5_100, 50, stamp(1, 50)),
      CORRECT[3]!,
    ];
    expect(broken(history({ samples }))).toEqual([
      expect.stringMatching(
        /^actuation-in-commit-order: target web went back from stamp r1 attempt 1 stage 1 epoch 1 \(50%\) to stamp r1 attempt 1 stage 0 epoch 1 \(10%\)/,
      ),
    ]);
    // After the rollback, the stage it rolled back from again.
    const reopened = [...CORRECT, sample(30_060, 30_100, 50, stamp(1, 50))];
    expect(broken(history({ samples: reopened }))).toContainEqual(
      expect.stringMatching(/^actuation-in-commit-order: target web went back from stamp r1 attempt 1 stage - epoch 1 \(0%\) to stamp r1 attempt 1 stage 1/),
    );
  });

  describe('an outside writer', () => {
    const edit: TargetEdit = { target: 'web', at: 4_000, stamp: stamp(1, 50), from: 50, percent: 70 };
    const edited = [...CORRECT.slice(0, 2), sample(3_100, 3_990, 50, stamp(1, 50)), sample(4_010, 30_000, 70, stamp(1, 50))];
    const fault: FaultRecord = { kind: 'target-outside-writer', target: 'web', startAt: 4_000, endAt: 6_000 };

    it('its edit is exempt, and left in place with the rollout paused naming the target, passes', () => {
      expect(
        broken(
          history({
            samples: edited,
            edits: [edit],
            faults: [fault],
            rollback: false,
            state: 'paused',
            reason: 'actuation drift on web (nginx): its weights were changed by someone else',
          }),
        ),
      ).toEqual([]);
    });

    it('left in place while the rollout runs on fails', () => {
      expect(broken(history({ samples: edited, edits: [edit], faults: [fault], rollback: false, state: 'running' }))).toEqual([
        expect.stringMatching(
          /^actuation-converges: target web carries an outside writer's edit and rollout r1 is running: it should be paused with a reason naming web/,
        ),
      ]);
    });

    it('replaced by the rollout later than a write under way could is drift fought', () => {
      const fought = [...edited.slice(0, 3), sample(4_010, 9_000, 70, stamp(1, 50)), sample(9_060, 30_000, 50, stamp(1, 50))];
      expect(broken(history({ samples: fought, edits: [edit], faults: [fault], rollback: false, state: 'running' }))).toEqual([
        expect.stringMatching(
          /^actuation-converges: target web: the outside writer's edit \(50% → 70%\) was replaced by r1 5\.06s later, with no command from a person: drift was fought/,
        ),
      ]);
    });

    it('a pause for drift no one caused fails', () => {
      const samples = [...CORRECT.slice(0, 2), sample(3_100, 30_000, 50, stamp(1, 50))];
      expect(
        broken(history({ samples, rollback: false, state: 'paused', reason: 'actuation drift on web (nginx): its weights were changed by someone else' })),
      ).toEqual([expect.stringMatching(/^actuation-converges: rollout r1 is paused for drift on web, which no one but the system wrote/)]);
    });
  });
});
