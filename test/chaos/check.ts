import type {
  ChaosHistory,
  FaultRecord,
  ItemTransition,
  LeaseChange,
  Op,
  ProcessSpan,
  RolloutRow,
  Stall,
  StoreDump,
  TargetEdit,
  TargetHistory,
  TargetSample,
  TargetStamp,
  Violation,
} from './history.js';
import { checkJudged } from './judged-check.js';
import { stalledSpans, worstStall } from './stalls.js';
import { MAX_ATTEMPTS } from '../../shared/ledger/model.js';

/**
 * The chaos checker. It reads only a ChaosHistory: what clients asked and
 * were told, what the nemesis broke, which processes lived when (the harness
 * knows: it started, killed and paused them), and the store's own change log
 * read with plain SQL or plain DynamoDB reads. It never asks the system what
 * it thinks happened.
 *
 * Safety (must hold in every schedule, faults or not):
 *   lease-one-holder-per-epoch   no two holders ever held the same lease epoch
 *   lease-epoch-monotonic        a lease's epoch never goes back; its row is never deleted
 *   write-under-current-epoch    a fenced write that records its epoch committed while the
 *                                lease row had that epoch (and holder); no fenced update while
 *                                the lease has no holder
 *   stage-promoted-once          a stage is promoted at most once
 *   no-promotion-after-rollback  never after the stage rolled back or its attempt ended
 *   one-result-per-item          at most one result per item; Done and Failed are final
 *   idempotency-once             a write sent under one Idempotency-Key took effect once
 *   acknowledged-write-kept      what the system acknowledged is in the store
 *   judged-reading-agrees        a judged gate's kept reading has the outcome its kept series give,
 *   promotion-judged-pass        and a stage the system promoted had each acting judged gate's tally
 *                                pass in its period, judged again by the checker's own judges: see
 *                                judged-check.ts for what the rule can know
 *   actuation-never-ahead        a target's observed share never exceeds the percent of the most
 *                                advanced stage committed so far in the attempt of the rollout whose
 *                                stamp it carries (final counts as 100 and needs a committed
 *                                completion; no stamp, no share); and after a committed rollback or
 *                                abort it carries 0 within one BatchPromoter tick plus the harness's
 *                                write slack, or, when faults were under way, that long plus the
 *                                leader bound after they healed
 *   actuation-epoch-monotonic    a target's stamp goes back to a lower lease epoch only by a write
 *                                that began its check (left the harness's gate, just before its
 *                                re-read of the stamp) before the higher epoch's stamp was seen
 *                                there: nginx cannot condition a write, and a writer stopped between
 *                                its re-read and its write may land late (a documented window). No
 *                                stamp names an epoch no leader had held yet
 *   actuation-in-commit-order    a target never goes back to an earlier committed state of the
 *                                rollout it carries (an earlier stage of the attempt, or an earlier
 *                                attempt) under a stamp of the same or a later epoch: a convergence
 *                                on a view older than one already carried out (lower epochs are the
 *                                rule above's)
 *
 *   Targets are read by the harness (the nginx include: split and stamp line), never through the
 *   system's own records of what it applied; what was committed comes from the store's change log.
 *   An outside writer's edit is drift, not ours: samples taken during that fault on the target, and
 *   samples that carry the edit, are exempt from the rules above.
 *
 * Liveness (after the faults heal, within the bounds the harness states):
 *   leader-after-heal            whenever there is promotion work after the faults heal (a
 *                                rollout running, or an event left in the outbox; a signal
 *                                asks for an evaluation only of a running rollout), a live
 *                                process holds promotion_leader within the bound. An idle
 *                                AWS stack campaigns for nothing and may hold no lease.
 *   runs-finish                  every item Done, or Failed with a reason
 *   rollouts-settle              every rollout terminal, paused, or waiting on an active stage's
 *                                bake (not stalled past it)
 *   pending-has-message          no item Pending without a message
 *   no-unclaimable-pending       no item left Pending once tried MAX_ATTEMPTS times: no worker
 *                                claims it again, so its coordinator must have failed it
 *   reads-answer                 every read through the proxy was answered by a node, throughout
 *   live-worker-keeps-items      an item is taken from a worker (re-pended) only when that
 *                                worker was silent for the failure timeout, or a fault explains it
 *                                (a worker drains, however late, on a spot notice sent to it),
 *                                or the worker (or the harness carrying its heartbeats) was stalled
 *                                for all of the failure timeout but two heartbeat intervals
 *   actuation-converges          once faults stop, every rollout's targets carry its committed state
 *                                (completed: final; rolled back or aborted: 0; running or paused: the
 *                                active stage's percent), judged at the last reading when the faults
 *                                healed a leader bound, and the rollout last moved, a tick plus the
 *                                write slack before it. A target left with
 *                                an outside writer's edit is judged instead by its rollout: paused
 *                                with a reason naming the target (or ended). The edit is never fought:
 *                                no write of the rollout replaces it later than a write already under
 *                                way could, unless a person commanded the rollout meanwhile. And no
 *                                rollout is paused for drift on a target no one else wrote.
 *
 * Every liveness bound is a time on an idle machine. Each process records its
 * own scheduling stalls (stalls.ts); a bound is extended by the most any
 * process it depends on was stalled within the window it judges, and the
 * message says so ("bound 30.00s + 4.2s stalled by node-2").
 */

const fmt = (ms: number | null) => (ms === null ? '—' : `${(ms / 1000).toFixed(2)}s`);

function leaseLine(c: LeaseChange): string {
  return `${fmt(c.at)} lease ${c.name} ${c.change} → holder ${c.holder ?? '∅'} epoch ${c.epoch}`;
}

function opLine(o: Op): string {
  return `${fmt(o.invokedAt)}–${fmt(o.completedAt)} ${o.client} ${o.kind}${o.target ? ` ${o.target}` : ''} via ${o.via}${o.key ? ` key ${o.key}` : ''}: ${o.outcome}${o.status ? ` ${o.status}` : ''}${o.node ? ` from ${o.node}` : ''}${o.detail ? ` (${o.detail})` : ''}`;
}

function stampLine(x: TargetStamp | null): string {
  return x ? `stamp ${x.rolloutId} attempt ${x.attempt} stage ${x.stage ?? '-'} epoch ${x.epoch} (${x.final ? 'final' : `${x.percent}%`})` : 'no stamp';
}

function sampleLine(x: TargetSample): string {
  return `${fmt(x.at)}–${fmt(x.until)} target ${x.target} carries ${x.final ? 'final' : `${x.percent}%`}, ${stampLine(x.stamp)}`;
}

function faultLine(f: FaultRecord): string {
  return `${fmt(f.startAt)}–${fmt(f.endAt)} fault ${f.kind} on ${f.target}${f.detail ? ` (${f.detail})` : ''}`;
}

function itemLine(t: ItemTransition): string {
  const side = (s: ItemTransition['from']) => (s ? `${s.state}(${s.worker ?? '∅'}${s.started ? ',started' : ''})` : '∅');
  return `${fmt(t.at)} item ${t.runId}/${t.itemId.slice(0, 12)} ${side(t.from)} → ${side(t.to)}${t.to.error ? ` error "${t.to.error.slice(0, 80)}"` : ''}`;
}

/** Alive and running (not paused) over the whole of [from, to]. */
function aliveThroughout(spans: readonly ProcessSpan[], process: string, from: number, to: number): boolean {
  return spans.some((s) => s.process === process && s.from <= from && (s.to === null || s.to >= to));
}

type Interval = readonly [number, number];

/**
 * When the promotion leader has something to do, as the store's history
 * shows it: each span a rollout was running, and each span an event sat in
 * the outbox (made, not yet marked published). What `BatchPromoter.hasWork`
 * asks, so an idle AWS stack, which then campaigns for nothing, is not judged.
 */
export function promotionWork(s: StoreDump, end: number): { span: Interval; what: string }[] {
  const out: { span: Interval; what: string }[] = [];
  const byRollout = new Map<string, typeof s.rolloutTransitions>();
  for (const t of s.rolloutTransitions) byRollout.set(t.rolloutId, [...(byRollout.get(t.rolloutId) ?? []), t]);
  for (const r of s.rollouts) {
    const transitions = [...(byRollout.get(r.id) ?? [])].sort((a, b) => a.seq - b.seq);
    // A rollout seen running with no change on record ran throughout.
    if (!transitions.length && r.state === 'running') out.push({ span: [0, end], what: `rollout ${r.id} running` });
    let since: number | null = null;
    for (const t of transitions) {
      if (t.to.state === 'running' && since === null) since = t.at;
      else if (t.to.state !== 'running' && since !== null) {
        out.push({ span: [since, t.at], what: `rollout ${r.id} running` });
        since = null;
      }
    }
    if (since !== null) out.push({ span: [since, end], what: `rollout ${r.id} running` });
  }
  for (const e of s.events) out.push({ span: [e.at, e.publishedAt ?? end], what: `event ${e.detailType} of ${e.rolloutId} in the outbox` });
  return out;
}

/** When a live process held promotion_leader: each holder's spans, cut at its lease's expiry (with the clock-offset slack) and at the next change. */
export function leaderSpans(changes: readonly LeaseChange[], processes: readonly ProcessSpan[], end: number, slackMs: number): Interval[] {
  const out: Interval[] = [];
  changes.forEach((c, i) => {
    if (c.change === 'delete' || c.holder === null) return;
    const next = changes[i + 1]?.at ?? end;
    const until = Math.min(next, c.expiresAt === null ? end : c.expiresAt + slackMs);
    for (const p of processes) {
      if (p.process !== c.holder) continue;
      const from = Math.max(c.at, p.from);
      const to = Math.min(until, p.to ?? end);
      if (from <= to) out.push([from, to]);
    }
  });
  return out.sort((a, b) => a[0] - b[0]);
}

/**
 * The first moment in `work` (within [from, to]) with no leader span meeting
 * [t, t + bound], or null. A moment t fails when it lies in a gap between
 * leader spans (g1, g2) with t + bound < g2.
 */
export function firstLeaderlessWork(work: readonly Interval[], leaders: readonly Interval[], bound: number, from: number, to: number): number | null {
  const gaps: Interval[] = [];
  let covered = Number.NEGATIVE_INFINITY;
  for (const [a, b] of leaders) {
    if (a > covered) gaps.push([covered, a]);
    covered = Math.max(covered, b);
  }
  gaps.push([covered, Number.POSITIVE_INFINITY]);
  let first: number | null = null;
  for (const [g1, g2] of gaps) {
    // Failing moments: (g1, g2 - bound), within [from, to].
    const lo = Math.max(g1, from);
    const hi = Math.min(g2 - bound, to);
    for (const [w1, w2] of work) {
      const a = Math.max(lo, w1);
      const b = Math.min(hi, w2);
      // (g1, …) is open at g1: a leader span ending at g1 covers g1 itself.
      if (a < b || (a === b && a > g1 && a < g2 - bound)) first = first === null ? a : Math.min(first, a);
    }
  }
  return first;
}

/** The harness process's own stalls: it carries the store links (local), the observing proxy (AWS) and the execution backend. */
export const HARNESS = 'harness';

/** The processes the control plane runs on (nodes, Lambda sandboxes) and the harness: what leadership and coordination wait on. */
function controlPlane(h: ChaosHistory): string[] {
  return [...h.nodes, ...h.processes.filter((p) => p.role === 'node' || p.role === 'lambda').map((p) => p.process), HARNESS];
}

/** How far a bound stretches for the window [from, to]: the most any of `processes` was stalled in it. */
export function stallAllowance(h: ChaosHistory, processes: Iterable<string>, from: number, to: number): { ms: number; process: string | null } {
  return to > from ? worstStall(h.stalls ?? [], processes, from, to) : { ms: 0, process: null };
}

/** A bound as the message reports it: with the stall it was extended by, if any. */
export function boundText(bound: number, stall: { ms: number; process: string | null }): string {
  return stall.ms > 0 ? `${fmt(bound)} + ${(stall.ms / 1000).toFixed(1)}s stalled by ${stall.process}` : fmt(bound);
}

/** How long within [from, to] any of `processes` was stalled (the union of their stalls). */
export function stalledAny(stalls: readonly Stall[], processes: readonly string[], from: number, to: number): number {
  const spans = processes.flatMap((p) => stalledSpans(stalls, p, from, to)).sort((a, b) => a[0] - b[0]);
  let total = 0;
  let covered = from;
  for (const [a, b] of spans) {
    const lo = Math.max(a, covered);
    if (b > lo) total += b - lo;
    covered = Math.max(covered, b);
  }
  return total;
}

function stallLine(x: Stall): string {
  return `${fmt(x.at)}–${fmt(x.at + x.ms)} ${x.process} stalled ${(x.ms / 1000).toFixed(2)}s`;
}

function faultsOverlapping(faults: readonly FaultRecord[], from: number, to: number, end: number): FaultRecord[] {
  return faults.filter((f) => f.startAt <= to && (f.endAt ?? end) >= from);
}

export function check(h: ChaosHistory): Violation[] {
  const out: Violation[] = [];
  const v = (invariant: string, kind: Violation['kind'], message: string, evidence: string[], at: number | null) =>
    out.push({ invariant, kind, message, evidence, at });
  const s = h.store;
  const end = h.phases.quietUntil;

  // ── leases ──────────────────────────────────────────────────────────────
  const byLease = new Map<string, LeaseChange[]>();
  for (const c of s.leaseChanges) byLease.set(c.name, [...(byLease.get(c.name) ?? []), c]);
  for (const [name, changes] of byLease) {
    const holders = new Map<number, LeaseChange>();
    let last: LeaseChange | null = null;
    for (const c of changes) {
      if (c.change === 'delete') {
        v(
          'lease-epoch-monotonic',
          'safety',
          `lease ${name} was deleted at epoch ${c.epoch}: the next acquisition restarts at epoch 0`,
          [...(last ? [leaseLine(last)] : []), leaseLine(c)],
          c.at,
        );
      } else if (last && c.epoch < last.epoch) {
        v('lease-epoch-monotonic', 'safety', `lease ${name} went back from epoch ${last.epoch} to ${c.epoch}`, [leaseLine(last), leaseLine(c)], c.at);
      }
      if (c.holder !== null && c.change !== 'delete') {
        const first = holders.get(c.epoch);
        if (first && first.holder !== c.holder) {
          v(
            'lease-one-holder-per-epoch',
            'safety',
            `lease ${name} epoch ${c.epoch} held by ${first.holder} and by ${c.holder}`,
            [leaseLine(first), leaseLine(c)],
            c.at,
          );
        } else if (!first) holders.set(c.epoch, c);
      }
      last = c;
    }
  }

  // ── fenced writes ───────────────────────────────────────────────────────
  for (const w of s.writes) {
    if (w.claimed) {
      const cur = w.current;
      const ok = cur !== null && cur.epoch === w.claimed.epoch && (w.claimed.holder === null || cur.holder === w.claimed.holder);
      if (!ok) {
        v(
          'write-under-current-epoch',
          'safety',
          `${w.table} ${w.key} written under ${w.claimed.holder ?? '?'}@${w.claimed.epoch} while ${w.lease} was ${cur ? `${cur.holder ?? '∅'}@${cur.epoch}` : 'absent'}`,
          [
            ...s.leaseChanges
              .filter((c) => c.name === w.lease && c.at <= w.at)
              .slice(-3)
              .map(leaseLine),
            `${fmt(w.at)} write ${w.table} ${w.key} ${JSON.stringify(w.before)} → ${JSON.stringify(w.after)} claimed ${JSON.stringify(w.claimed)}`,
          ],
          w.at,
        );
      }
    } else if (w.before !== null && w.lease === 'promotion_leader' && (w.current === null || w.current.holder === null)) {
      v(
        'write-under-current-epoch',
        'safety',
        `${w.table} ${w.key} changed while ${w.lease} had no holder`,
        [
          ...s.leaseChanges
            .filter((c) => c.name === w.lease && c.at <= w.at)
            .slice(-2)
            .map(leaseLine),
          `${fmt(w.at)} write ${w.table} ${w.key} ${JSON.stringify(w.before)} → ${JSON.stringify(w.after)}`,
        ],
        w.at,
      );
    }
  }

  // ── promotion ───────────────────────────────────────────────────────────
  const promoted = new Map<string, number>();
  for (const t of s.stageTransitions) {
    const key = `${t.rolloutId}/${t.attempt}/${t.index}`;
    const line = (x: typeof t) =>
      `${fmt(x.at)} stage ${x.rolloutId} attempt ${x.attempt} #${x.index} ${x.from ?? '∅'} → ${x.to}${x.by ? ` by ${x.by}@${x.epoch}` : ''}`;
    if (t.to !== 'promoted') continue;
    const n = (promoted.get(key) ?? 0) + 1;
    promoted.set(key, n);
    if (n > 1)
      v(
        'stage-promoted-once',
        'safety',
        `stage ${key} promoted ${n} times`,
        s.stageTransitions.filter((x) => `${x.rolloutId}/${x.attempt}/${x.index}` === key).map(line),
        t.at,
      );
    if (t.from === 'rolled_back')
      v(
        'no-promotion-after-rollback',
        'safety',
        `stage ${key} promoted after it was rolled back`,
        s.stageTransitions.filter((x) => `${x.rolloutId}/${x.attempt}/${x.index}` === key).map(line),
        t.at,
      );
    const ended = s.rolloutTransitions.find(
      (r) =>
        r.rolloutId === t.rolloutId &&
        r.seq < t.seq &&
        r.from?.attempt === t.attempt &&
        r.to.attempt === t.attempt &&
        (r.to.state === 'rolled_back' || r.to.state === 'aborted'),
    );
    if (ended) {
      v(
        'no-promotion-after-rollback',
        'safety',
        `stage ${key} promoted after its attempt was ${ended.to.state}`,
        [`${fmt(ended.at)} rollout ${ended.rolloutId} ${ended.from?.state} → ${ended.to.state} (${ended.to.reason ?? ''})`, line(t)],
        t.at,
      );
    }
  }

  // ── results ─────────────────────────────────────────────────────────────
  const results = new Map<string, ItemTransition[]>();
  for (const t of s.itemTransitions) {
    const key = `${t.runId}/${t.itemId}`;
    if (t.from && (t.from.state === 'done' || t.from.state === 'failed')) {
      v('one-result-per-item', 'safety', `item ${key} left ${t.from.state}`, [itemLine(t)], t.at);
    }
    if (t.to.state === 'done' || (t.from?.state === 'done' && t.to.resultHash !== null)) {
      const prior = results.get(key) ?? [];
      results.set(key, [...prior, t]);
      if (prior.length) v('one-result-per-item', 'safety', `item ${key} recorded ${prior.length + 1} results`, [...prior, t].map(itemLine), t.at);
    }
  }

  // ── what clients were told ──────────────────────────────────────────────
  const byKey = new Map<string, number>();
  for (const r of s.rollouts) if (r.labels.key) byKey.set(r.labels.key, (byKey.get(r.labels.key) ?? 0) + 1);
  for (const o of h.ops) {
    if (o.kind === 'rollout.create' && o.key) {
      const n = byKey.get(o.key) ?? 0;
      if (n > 1) v('idempotency-once', 'safety', `rollout create with key ${o.key} made ${n} rollouts`, [opLine(o)], o.completedAt);
      if (o.outcome === 'ok' && (n === 0 || (typeof o.result?.id === 'string' && !s.rollouts.some((r) => r.id === o.result!.id)))) {
        v(
          'acknowledged-write-kept',
          'safety',
          `rollout ${typeof o.result?.id === 'string' ? o.result.id : o.key} was acknowledged and is not in the store`,
          [opLine(o)],
          o.completedAt,
        );
      }
    }
    if (o.kind === 'run.create' && o.outcome === 'ok' && o.target) {
      const run = s.runs.find((r) => r.id === o.target);
      const want = Number(o.result?.items ?? 0);
      if (!run || run.items < want)
        v(
          'acknowledged-write-kept',
          'safety',
          `run ${o.target} was acknowledged with ${want} items; the store has ${run ? run.items : 'no run'}`,
          [opLine(o)],
          o.completedAt,
        );
    }
    if ((o.kind === 'rollout.pause' || o.kind === 'rollout.abort') && o.key && o.target) {
      const applied = s.rolloutTransitions.filter(
        (r) => r.rolloutId === o.target && r.to.reason === o.key && (r.from?.state !== r.to.state || r.from?.attempt !== r.to.attempt),
      );
      if (applied.length > 1)
        v(
          'idempotency-once',
          'safety',
          `${o.kind} with key ${o.key} applied ${applied.length} times`,
          [opLine(o), ...applied.map((r) => `${fmt(r.at)} rollout ${r.rolloutId} ${r.from?.state} → ${r.to.state}`)],
          o.completedAt,
        );
      if (o.outcome === 'ok' && o.result?.applied === true && applied.length === 0) {
        v('acknowledged-write-kept', 'safety', `${o.kind} of ${o.target} was acknowledged as applied and is not in the store`, [opLine(o)], o.completedAt);
      }
    }
  }

  if (h.targets) checkActuation(h, h.targets, v);
  checkJudged(h, v);

  // ── liveness ────────────────────────────────────────────────────────────
  const healed = h.phases.healedAt;
  const bound = h.bounds.leaderWithinMs;
  if (healed + bound <= end) {
    const changes = s.leaseChanges.filter((c) => c.name === 'promotion_leader');
    // Expiry is written on the holder's clock, which a clock-offset fault may have set up to 4 s off.
    const leaders = leaderSpans(changes, h.processes, end, 5_000);
    const work = promotionWork(s, end);
    const plane = controlPlane(h);
    // The first moment with no leader within the bound, the bound stretched by the stalls of the window it judges.
    let stall = { ms: 0, process: null as string | null };
    let t: number | null = null;
    for (let round = 0; round < 8; round++) {
      t = firstLeaderlessWork(
        work.map((w) => w.span),
        leaders,
        bound + stall.ms,
        healed,
        end - bound - stall.ms,
      );
      if (t === null) break;
      const more = stallAllowance(h, plane, t, Math.min(end, t + bound + stall.ms));
      if (more.ms <= stall.ms) break;
      stall = more;
    }
    if (t !== null) {
      const what = work.filter((w) => w.span[0] <= t && t <= w.span[1]).map((w) => w.what);
      const before = changes.filter((c) => c.at <= t + bound);
      const holder = before.at(-1)?.change === 'delete' ? null : (before.at(-1)?.holder ?? null);
      v(
        'leader-after-heal',
        'liveness',
        `promotion work at ${fmt(t)} (${what.slice(0, 2).join('; ')}${what.length > 2 ? `; ${what.length - 2} more` : ''}) and no live leader within ${boundText(bound, stall)} (lease holder: ${holder ?? 'none'})`,
        [...before.slice(-3).map(leaseLine), ...h.faults.slice(-3).map(faultLine)],
        t + bound + stall.ms,
      );
    }
  }

  const finishWithin = h.bounds.runsFinishWithinMs;
  for (const run of s.runs) {
    const items = s.items.filter((i) => i.runId === run.id);
    // A run waits on its workers, the control plane that coordinates them, and the harness's backend.
    const runsOn = [...new Set(s.itemTransitions.filter((x) => x.runId === run.id && x.to.worker).map((x) => x.to.worker!)), ...controlPlane(h)];
    const open = items.filter((i) => i.state === 'pending' || i.state === 'running');
    const unexplained = items.filter((i) => i.state === 'failed' && !i.error);
    if (open.length) {
      v(
        'runs-finish',
        'liveness',
        `run ${run.id}: ${open.length} of ${items.length} items still open ${fmt(end - healed)} after the faults healed (bound ${boundText(finishWithin, stallAllowance(h, runsOn, healed, end))})`,
        open.slice(0, 5).map((i) => `item ${i.id.slice(0, 12)} ${i.state}(${i.worker ?? '∅'}) attempts ${i.attempts}`),
        end,
      );
    } else {
      const last = s.itemTransitions.filter((t) => t.runId === run.id && (t.to.state === 'done' || t.to.state === 'failed')).at(-1);
      const stall = last ? stallAllowance(h, runsOn, healed, last.at) : { ms: 0, process: null };
      if (last && last.at > healed + finishWithin + stall.ms)
        v(
          'runs-finish',
          'liveness',
          `run ${run.id} finished ${fmt(last.at - healed)} after the faults healed (bound ${boundText(finishWithin, stall)})`,
          [itemLine(last)],
          last.at,
        );
    }
    if (unexplained.length)
      v(
        'runs-finish',
        'liveness',
        `run ${run.id}: ${unexplained.length} items Failed without a reason`,
        unexplained.slice(0, 5).map((i) => `item ${i.id}`),
        end,
      );
    // Tried as many times as any worker claims an item: nobody will take it again, so only its coordinator can end it.
    const unclaimable = items.filter((i) => i.state === 'pending' && i.attempts >= MAX_ATTEMPTS);
    if (unclaimable.length)
      v(
        'no-unclaimable-pending',
        'liveness',
        `run ${run.id}: ${unclaimable.length} items Pending after ${MAX_ATTEMPTS} attempts at the end, which no worker claims and nothing failed`,
        unclaimable
          .slice(0, 5)
          .map((i) => `item ${i.id.slice(0, 12)} attempts ${i.attempts}${i.hasMessage ? '' : ', no message'}${i.error ? `; last error: ${i.error}` : ''}`),
        end,
      );
    const silent = items.filter((i) => i.state === 'pending' && !i.hasMessage);
    if (silent.length)
      v(
        'pending-has-message',
        'liveness',
        `run ${run.id}: ${silent.length} Pending items have no message`,
        silent.slice(0, 5).map((i) => `item ${i.id}`),
        end,
      );
  }

  for (const r of s.rollouts) {
    if (['completed', 'rolled_back', 'aborted', 'paused'].includes(r.state)) continue;
    const active = r.stages.filter((x) => x.attempt === r.attempt && x.phase === 'active');
    const bakeMs = Number(r.labels.bakeMs ?? NaN);
    if (active.length !== 1) {
      v(
        'rollouts-settle',
        'liveness',
        `rollout ${r.id} is ${r.state} with ${active.length} active stages`,
        r.stages.map((x) => `attempt ${x.attempt} #${x.index} ${x.name} ${x.phase}`),
        end,
      );
    } else if (r.labels.expect === 'promote' && Number.isFinite(bakeMs)) {
      // Healthy readings keep coming for it: once its bake is over and a leader could act (a leader's
      // worth of slack after healing), it must have moved on. Activation is read from the audit log (the
      // store's clock), not from the row (the writing node's clock).
      const stage = active[0]!;
      const activated =
        s.stageTransitions.filter((x) => x.rolloutId === r.id && x.attempt === r.attempt && x.index === stage.index && x.to === 'active').at(-1)?.at ??
        stage.activatedAt;
      const due = activated === null ? null : Math.max(activated + bakeMs, healed);
      const stall = due === null ? { ms: 0, process: null } : stallAllowance(h, controlPlane(h), due, end);
      if (due !== null && due + h.bounds.leaderWithinMs + stall.ms < end) {
        v(
          'rollouts-settle',
          'liveness',
          `rollout ${r.id} stalled on stage ${stage.name}: active since ${fmt(activated)}, bake ${fmt(bakeMs)}, healthy readings, still active at ${fmt(end)} (bound ${boundText(h.bounds.leaderWithinMs, stall)} after the bake)`,
          [],
          end,
        );
      }
    }
  }

  for (const o of h.ops) {
    if (!o.kind.startsWith('read.') || o.via !== 'nginx') continue;
    if (o.outcome === 'unknown' || (o.outcome === 'failed' && !o.node)) {
      v(
        'reads-answer',
        'liveness',
        `a read through the proxy got no answer from any node`,
        [opLine(o), ...faultsOverlapping(h.faults, o.invokedAt, o.completedAt ?? end, end).map(faultLine)],
        o.invokedAt,
      );
    }
  }

  // An item taken back from a live worker that kept heartbeating is work thrown away.
  const timeout = h.bounds.failureTimeoutMs;
  const heartbeat = h.bounds.heartbeatMs ?? 0;
  for (const t of s.itemTransitions) {
    if (!t.from || t.from.state !== 'running' || t.to.state !== 'pending' || !t.from.worker) continue;
    const worker = t.from.worker;
    if (!h.workers.includes(worker)) continue;
    // The process that got the item must have lived through it: a restarted worker gives back what its predecessor held.
    const got = s.itemTransitions.filter((x) => x.itemId === t.itemId && x.seq < t.seq && x.to.state === 'running' && x.to.worker === worker).at(-1);
    const window = [Math.min(t.at - timeout - 1_000, got?.at ?? 0), t.at] as const;
    if (!aliveThroughout(h.processes, worker, window[0], window[1])) continue;
    // The worker gave it back itself (its backend failed it, or it was told to stop).
    if (h.ops.some((o) => o.kind === 'backend.execute' && o.target === t.itemId && o.outcome === 'failed' && o.invokedAt <= t.at)) continue;
    // It drained on a spot notice for its instance: however late the drain came (on a starved machine, after the
    // notice's fault was recorded as over), handing its items back is what a notice asks of it.
    if (
      t.to.error === 'drained' &&
      h.faults.some((f) => (f.kind === 'notice-duplicated' || f.kind === 'notice-late') && f.target === worker && f.startAt <= t.at)
    )
      continue;
    const excuses = faultsOverlapping(h.faults, window[0], window[1], end).filter(
      (f) => f.target === worker || f.kind.startsWith('store-') || f.kind === 'clock-offset',
    );
    if (excuses.length) continue;
    // Starved of the CPU, a worker cannot heartbeat, as if paused: its heartbeats could be late by the failure
    // timeout when it (or the harness carrying them) was stalled for all of it but two heartbeat intervals,
    // one for the heartbeat's own period and one for its write, which a starved store delays too.
    const stalled = stalledAny(h.stalls ?? [], [worker, HARNESS], t.at - timeout, t.at);
    if (stalled >= timeout - 2 * heartbeat) continue;
    const stalls = (h.stalls ?? []).filter((x) => (x.process === worker || x.process === HARNESS) && x.at < t.at && x.at + x.ms > t.at - timeout);
    v(
      'live-worker-keeps-items',
      'liveness',
      `item ${t.runId}/${t.itemId.slice(0, 12)} taken back from ${worker}, alive and unfaulted for the failure timeout before${stalled > 0 ? ` (stalled ${fmt(stalled)} of its ${fmt(timeout)}: heartbeats could be on time)` : ''}`,
      [
        ...s.itemTransitions
          .filter((x) => x.itemId === t.itemId && x.at <= t.at)
          .slice(-3)
          .map(itemLine),
        ...stalls.slice(-3).map(stallLine),
      ],
      t.at,
    );
  }

  return out.sort((a, b) => (a.at ?? 0) - (b.at ?? 0));
}

/** Harness clock (samples) against the store's clock (the change log): one host, read the same way; a few ms at most. */
const CLOCK_MARGIN_MS = 10;

const TERMINAL = ['completed', 'rolled_back', 'aborted'];

const sameStamp = (a: TargetStamp | null, b: TargetStamp | null) => JSON.stringify(a) === JSON.stringify(b);

/** A reading that is the outside writer's edit itself. */
const carriesEdit = (x: TargetSample, e: TargetEdit) =>
  x.target === e.target && x.at >= e.at - CLOCK_MARGIN_MS && !x.final && x.percent === e.percent && sameStamp(x.stamp, e.stamp);

type Add = (invariant: string, kind: Violation['kind'], message: string, evidence: string[], at: number | null) => void;

function checkActuation(h: ChaosHistory, t: TargetHistory, v: Add): void {
  const s = h.store;
  const end = h.phases.quietUntil;
  const rollouts = new Map(s.rollouts.map((r) => [r.id, r]));
  const byTarget = new Map<string, TargetSample[]>();
  for (const x of t.samples) byTarget.set(x.target, [...(byTarget.get(x.target) ?? []), x]);
  for (const xs of byTarget.values()) xs.sort((a, b) => a.at - b.at);
  const outside = h.faults.filter((f) => f.kind === 'target-outside-writer');
  const exempt = (x: TargetSample) =>
    t.edits.some((e) => carriesEdit(x, e)) || outside.some((f) => f.target === x.target && x.at >= f.startAt && x.at <= (f.endAt ?? end));
  const stageLine = (x: (typeof s.stageTransitions)[number]) => `${fmt(x.at)} stage ${x.rolloutId} attempt ${x.attempt} #${x.index} ${x.from ?? '∅'} → ${x.to}`;
  const rolloutLine = (x: (typeof s.rolloutTransitions)[number]) =>
    `${fmt(x.at)} rollout ${x.rolloutId} ${x.from ? `${x.from.state}@${x.from.attempt}` : '∅'} → ${x.to.state}@${x.to.attempt}${x.to.reason ? ` (${x.to.reason.slice(0, 100)})` : ''}`;
  const percentOf = (r: RolloutRow, index: number) => r.stagePercents?.[index] ?? 100;

  // ── never ahead of what was committed ──
  for (const x of t.samples) {
    if (exempt(x)) continue;
    if (!x.stamp) {
      if (x.percent > 0 || x.final)
        v(
          'actuation-never-ahead',
          'safety',
          `target ${x.target} carries ${x.final ? 'final' : `${x.percent}%`} with no rollout's stamp`,
          [sampleLine(x)],
          x.at,
        );
      continue;
    }
    const r = rollouts.get(x.stamp.rolloutId);
    if (!r) continue;
    const { attempt } = x.stamp;
    const by = x.at + CLOCK_MARGIN_MS;
    const stages = s.stageTransitions.filter((st) => st.rolloutId === r.id && st.attempt === attempt && (st.to === 'active' || st.to === 'promoted'));
    const committed = stages.filter((st) => st.at <= by);
    const allowed = Math.max(0, ...committed.map((st) => percentOf(r, st.index)));
    if (x.final) {
      const done = s.rolloutTransitions.find((rt) => rt.rolloutId === r.id && rt.to.state === 'completed' && rt.to.attempt === attempt);
      if (!done || done.at > by)
        v(
          'actuation-never-ahead',
          'safety',
          `target ${x.target} was final for ${r.id} attempt ${attempt} ${done ? `${fmt(done.at - x.at)} before its completion was committed` : 'and its completion was never committed'}`,
          [sampleLine(x), ...(done ? [rolloutLine(done)] : [])],
          x.at,
        );
    } else if (x.percent > allowed) {
      const later = stages.find((st) => st.at > by && percentOf(r, st.index) >= x.percent);
      v(
        'actuation-never-ahead',
        'safety',
        `target ${x.target} carried ${x.percent}% of ${r.id} attempt ${attempt} while its most advanced committed stage had ${allowed}%${later ? `; the stage with ${percentOf(r, later.index)}% was committed ${fmt(later.at - x.at)} later` : '; no stage with that share was ever committed'}`,
        [...committed.slice(-1).map(stageLine), sampleLine(x), ...(later ? [stageLine(later)] : [])],
        x.at,
      );
    }
  }

  // ── back to 0 after a rollback or an abort ──
  const write = t.tickMs + t.writeSlackMs;
  const plane = controlPlane(h);
  const settleBy = (at: number): number => {
    let deadline = at + write;
    for (;;) {
      const under = h.faults.filter((f) => f.startAt <= deadline && (f.endAt ?? end) >= at);
      if (!under.length) break;
      const next = Math.max(...under.map((f) => f.endAt ?? end)) + h.bounds.leaderWithinMs + write;
      if (next <= deadline) break;
      deadline = next;
    }
    // Stretched by the nodes' stalls meanwhile: a starved node writes late.
    return deadline + stallAllowance(h, plane, at, deadline).ms;
  };
  for (const rt of s.rolloutTransitions) {
    if (rt.to.state !== 'rolled_back' && rt.to.state !== 'aborted') continue;
    if (rt.from?.state === rt.to.state && rt.from.attempt === rt.to.attempt) continue;
    const r = rollouts.get(rt.rolloutId);
    for (const target of r?.actuators ?? []) {
      const deadline = settleBy(rt.at);
      const late = (byTarget.get(target) ?? []).find(
        (x) => x.until >= deadline && !exempt(x) && x.stamp?.rolloutId === rt.rolloutId && x.stamp.attempt === rt.to.attempt && (x.percent > 0 || x.final),
      );
      if (late) {
        v(
          'actuation-never-ahead',
          'safety',
          `target ${target} still carried ${late.final ? 'final' : `${late.percent}%`} of ${rt.rolloutId} attempt ${rt.to.attempt} at ${fmt(Math.max(late.at, deadline))}, after its ${rt.to.state === 'aborted' ? 'abort' : 'rollback'} at ${fmt(rt.at)} (due at 0 by ${fmt(deadline)})`,
          [rolloutLine(rt), ...faultsOverlapping(h.faults, rt.at, deadline, end).map(faultLine), sampleLine(late)],
          Math.max(late.at, deadline),
        );
      }
    }
  }

  // ── stamps' epochs ──
  // nginx cannot condition a write: a writer re-reads the stamp just before it, and one stopped between that
  // check and its write lands late (documented, and repaired by the successor). So a lower epoch may replace a
  // higher one only by a write whose check (when it left the harness's gate) began before the higher stamp was
  // seen on the target. Without the gate's record, every regression counts.
  const epochs = s.leaseChanges.filter((c) => c.name === 'promotion_leader' && c.change !== 'delete');
  for (const [target, xs] of byTarget) {
    let prev: TargetSample | null = null;
    for (const x of xs) {
      const stamp = x.stamp;
      if (!stamp) continue;
      if (prev?.stamp && stamp.epoch < prev.stamp.epoch) {
        // The first time a higher epoch was seen on the target.
        const higher = xs.find((y) => y.at < x.at && y.stamp !== null && y.stamp.epoch > stamp.epoch)!;
        const check = t.checks?.filter((c) => c.target === target && sameStamp(c.stamp, stamp) && c.at <= x.at + CLOCK_MARGIN_MS).at(-1);
        if (!t.checks || !check || check.at > higher.at + CLOCK_MARGIN_MS) {
          v(
            'actuation-epoch-monotonic',
            'safety',
            `target ${target}'s stamp went back from epoch ${prev.stamp.epoch} to ${stamp.epoch}: an older leader's write replaced a newer one's${check ? `, and it began its check ${fmt(check.at - higher.at)} after epoch ${higher.stamp!.epoch}'s stamp was seen there` : ''}`,
            [
              sampleLine(higher),
              ...h.faults.filter((f) => f.startAt <= x.at && (f.endAt ?? end) >= higher.at).map(faultLine),
              ...(check ? [`${fmt(check.at)} write of ${stampLine(check.stamp)} to ${target} began its check (pid ${check.pid})`] : []),
              sampleLine(x),
            ],
            x.at,
          );
        }
      }
      const held = Math.max(-1, ...epochs.filter((c) => c.at <= x.at + CLOCK_MARGIN_MS).map((c) => c.epoch));
      if (stamp.epoch > held)
        v(
          'actuation-epoch-monotonic',
          'safety',
          `target ${target} is stamped with epoch ${stamp.epoch}, and no leader had held an epoch above ${held} by then`,
          [
            sampleLine(x),
            ...epochs
              .filter((c) => c.at <= x.at)
              .slice(-1)
              .map(leaseLine),
          ],
          x.at,
        );
      prev = x;
    }
  }

  // ── in commit order ──
  // Where a stamp stands in its attempt: a stage by its index; a rollback, an abort or a completion after all of them.
  const rank = (x: TargetStamp, at: number): number => {
    if (x.final) return Number.POSITIVE_INFINITY;
    if (x.stage !== null) return x.stage;
    const ended = s.rolloutTransitions.some(
      (rt) =>
        rt.rolloutId === x.rolloutId &&
        rt.to.attempt === x.attempt &&
        (rt.to.state === 'rolled_back' || rt.to.state === 'aborted') &&
        rt.at <= at + CLOCK_MARGIN_MS,
    );
    return ended ? Number.POSITIVE_INFINITY : -1;
  };
  for (const xs of byTarget.values()) {
    let prev: TargetSample | null = null;
    for (const x of xs) {
      if (!x.stamp || exempt(x)) continue;
      const p = prev?.stamp;
      if (
        prev &&
        p &&
        p.rolloutId === x.stamp.rolloutId &&
        x.stamp.epoch >= p.epoch &&
        (x.stamp.attempt < p.attempt || (x.stamp.attempt === p.attempt && rank(x.stamp, x.at) < rank(p, prev.at)))
      ) {
        const between = [
          ...s.stageTransitions
            .filter((st) => st.rolloutId === p.rolloutId && st.to !== 'pending' && st.at <= x.at)
            .map((st) => ({ at: st.at, line: stageLine(st) })),
          ...s.rolloutTransitions.filter((rt) => rt.rolloutId === p.rolloutId && rt.at <= x.at).map((rt) => ({ at: rt.at, line: rolloutLine(rt) })),
        ]
          .sort((a, b) => a.at - b.at)
          .slice(-3);
        v(
          'actuation-in-commit-order',
          'safety',
          `target ${x.target} went back from ${stampLine(p)} to ${stampLine(x.stamp)}: an older state of ${p.rolloutId} was carried out after a newer one`,
          [sampleLine(prev), ...between.map((b) => b.line), sampleLine(x)],
          x.at,
        );
      }
      prev = x;
    }
  }

  // ── converged once faults stop ──
  const commands = (id: string, from: number, to: number) =>
    h.ops.filter(
      (o) =>
        o.target === id &&
        o.client !== 'creator' &&
        o.kind.startsWith('rollout.') &&
        o.kind !== 'rollout.pause' &&
        o.outcome !== 'failed' &&
        o.invokedAt <= to &&
        (o.completedAt ?? end) >= from,
    );
  const names = (reason: string | null, target: string) =>
    reason !== null && new RegExp(`(^|[^\\w-])${target.replace(/[^\w]/g, '\\$&')}([^\\w-]|$)`).test(reason);
  for (const r of s.rollouts) {
    for (const target of r.actuators ?? []) {
      const xs = byTarget.get(target) ?? [];
      const last = xs.at(-1);
      if (!last) continue;
      const edits = t.edits.filter((e) => e.target === target);
      // Never fought: a write of the rollout that replaced the edit after a write under way could have.
      for (const e of edits) {
        const after = xs.find((x) => x.at > e.at && !carriesEdit(x, e));
        if (!after || after.stamp?.rolloutId !== e.stamp?.rolloutId || after.at <= e.at + write) continue;
        if (!xs.some((x) => carriesEdit(x, e) && x.at < after.at)) continue;
        if (e.stamp && commands(e.stamp.rolloutId, e.at, after.at).length) continue;
        v(
          'actuation-converges',
          'liveness',
          `target ${target}: the outside writer's edit (${e.from}% → ${e.percent}%) was replaced by ${e.stamp?.rolloutId ?? 'a rollout'} ${fmt(after.at - e.at)} later, with no command from a person: drift was fought`,
          [`${fmt(e.at)} target ${target} edited by hand: ${e.from}% → ${e.percent}%, ${stampLine(e.stamp)}`, sampleLine(after)],
          after.at,
        );
      }
      const changes = [
        ...s.rolloutTransitions.filter((x) => x.rolloutId === r.id).map((x) => x.at),
        ...s.stageTransitions.filter((x) => x.rolloutId === r.id).map((x) => x.at),
      ];
      const moved = Math.max(h.phases.healedAt + h.bounds.leaderWithinMs, ...changes);
      if (moved + write + stallAllowance(h, plane, h.phases.healedAt, last.until).ms > last.until) continue;
      const edit = edits.filter((e) => carriesEdit(last, e)).at(-1);
      const state = `${r.state}${r.reason ? ` (${r.reason.slice(0, 120)})` : ''}`;
      if (edit) {
        if (!TERMINAL.includes(r.state) && !(r.state === 'paused' && names(r.reason, target))) {
          v(
            'actuation-converges',
            'liveness',
            `target ${target} carries an outside writer's edit and rollout ${r.id} is ${state}: it should be paused with a reason naming ${target}`,
            [`${fmt(edit.at)} target ${target} edited by hand: ${edit.from}% → ${edit.percent}%`, sampleLine(last)],
            last.until,
          );
        }
        continue;
      }
      const active = r.stages.find((x) => x.attempt === r.attempt && x.phase === 'active');
      const ours = last.stamp?.rolloutId === r.id && last.stamp.attempt === r.attempt;
      let want: string | null = null;
      if (r.state === 'completed') want = last.final && ours ? null : `final, stamped by ${r.id} attempt ${r.attempt}`;
      else if (r.state === 'rolled_back' || r.state === 'aborted') want = !last.final && last.percent === 0 ? null : '0%';
      else if (!active) want = !last.final && last.percent === 0 ? null : '0% (no stage active)';
      else {
        const p = percentOf(r, active.index);
        want = !last.final && last.percent === p && ours && last.stamp?.stage === active.index ? null : `${p}%, stage ${active.index} of attempt ${r.attempt}`;
      }
      if (want !== null) {
        const recent = [
          ...s.rolloutTransitions.filter((x) => x.rolloutId === r.id).map(rolloutLine),
          ...s.stageTransitions.filter((x) => x.rolloutId === r.id).map(stageLine),
        ].slice(-3);
        v(
          'actuation-converges',
          'liveness',
          `target ${target} carries ${last.final ? 'final' : `${last.percent}%`} (${stampLine(last.stamp)}) at the end; rollout ${r.id} is ${state} and asks for ${want}`,
          [...recent, sampleLine(last)],
          last.until,
        );
      }
      // Paused for drift: someone else must have written the target.
      if (r.state === 'paused' && r.reason?.startsWith('actuation drift') && names(r.reason, target) && !edits.length) {
        v(
          'actuation-converges',
          'liveness',
          `rollout ${r.id} is paused for drift on ${target}, which no one but the system wrote`,
          [`rollout ${r.id} ${state}`, ...xs.slice(-3).map(sampleLine)],
          last.until,
        );
      }
    }
  }
}

/** One line per invariant broken, with counts: for the summary. */
export function countByInvariant(violations: readonly Violation[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of violations) out[x.invariant] = (out[x.invariant] ?? 0) + 1;
  return out;
}

/** A readable report of one violation: the message and the history slice that shows it. */
export function report(x: Violation): string {
  return [`✗ ${x.kind} · ${x.invariant} at ${fmt(x.at)}: ${x.message}`, ...x.evidence.map((e) => `    ${e}`)].join('\n');
}
