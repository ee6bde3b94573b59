import type { ChaosHistory, EventRow, GateReadingRow, RolloutRow, StageTransition, Violation } from './history.js';
import { recompute, type JudgedOutcome, type KeptSeries, type Recomputed } from './judge.js';

/**
 * The checker's rules on judged gates (a provider gate with a `judge`), from
 * the store's records alone: the spec (read with plain SQL), each reading the
 * store kept with the series it was judged on, and where each reading, stage
 * change and lease change stands in the store's own change log. Every
 * judgement is made again by the checker's own judges (judge.ts).
 *
 *   judged-reading-agrees    a kept judged reading's outcome is what its series give; a pass keeps
 *                            its series (a judged pass with nothing to judge is no pass)
 *   promotion-judged-pass    a stage promoted by the system (`promoter:…`, not a person) had, for
 *                            each of its judged gates that acts (not dryRun), a reading in the stage's
 *                            current period (since its activation, or the rollout's last resume)
 *                            logged before the promotion, and the gate's tally as the store built it
 *                            from those readings (the newest by the reading's own time, as a tally
 *                            keeps it; the passes in a row ending there) passed, judged again:
 *                            with `consecutiveSuccesses` passes in a row.
 *
 * What the rule can know: a promoter decides on a view read some time before
 * its promotion commits, and readings are recorded outside the fence, so a
 * reading logged between that view and the commit may not have been seen.
 * While one leader (holder and epoch) held the lease through the period, one
 * process read the gates and decided, in that order, so the tally at the
 * commit is the one it decided on: the rule asks it to pass. Where leadership
 * moved within the period, or the period began with a resume (a reading of the
 * older period may land after it and a tally would not count it), a deposed
 * leader's late reading may have landed unseen: the rule asks only that the
 * tally passed at some point of the period (after some reading's commit), and
 * says which form it judged by. onFail changes what failures past the limit
 * do, never that a failing newest reading holds the stage, so it changes
 * nothing here.
 *
 * A stage whose spec says `onInsufficientData: "pass"` may promote with a gate
 * whose newest reading could not judge for too little data ("not enough data",
 * judged again): the rule accepts that reading in place of a pass only when
 * the stage's stage_promoted event says it passed on insufficient data and its
 * time is at least the stretch (maxBakeSeconds, or the bake) after the time of
 * the event that began the period (the activation or the resume). Those are
 * the promoters' own `now` as the evaluator compared them (lastProgressAt is
 * the beginning event's time), so no margin for commit latency is needed. A
 * failing or otherwise inconclusive newest reading is never accepted.
 */

type Json = Record<string, unknown>;
type Add = (invariant: string, kind: Violation['kind'], message: string, evidence: string[], at: number | null) => void;

const fmt = (ms: number | null) => (ms === null ? '—' : `${(ms / 1000).toFixed(2)}s`);

export interface JudgedGate {
  readonly name: string;
  readonly judge: Json;
  readonly dryRun: boolean;
  readonly consecutiveSuccesses: number;
}

/** The judged gates a stage reads, from the spec: its own, and the rollout-wide ones from `fromStage` on (judged ones not at 100 %, where no baseline is left). */
export function judgedGatesOf(r: RolloutRow, stage: number): JudgedGate[] {
  const judged = (g: Json) => ['prometheus', 'cloudwatchMetric', 'signals'].includes(String(g.type)) && typeof g.judge === 'object' && g.judge !== null;
  const gates: Json[] = [...(r.stageGates?.[stage] ?? [])];
  const wide = r.rolloutGates;
  if (wide && Array.isArray(wide.providers)) {
    const raw = wide.fromStage ?? 0;
    const from = typeof raw === 'number' ? raw : (r.stages.find((s) => s.name === raw)?.index ?? null);
    const percent = r.stagePercents?.[stage] ?? 100;
    if (from !== null && stage >= from) gates.push(...(wide.providers as Json[]).filter((g) => percent < 100 || !judged(g)));
  }
  return gates.filter(judged).map((g) => ({
    name: String(g.name),
    judge: g.judge as Json,
    dryRun: g.dryRun === true,
    consecutiveSuccesses: typeof g.consecutiveSuccesses === 'number' ? g.consecutiveSuccesses : 1,
  }));
}

interface Judged {
  readonly row: GateReadingRow;
  /** The checker's own judgement, or null when the reading kept no series (a provider error: its stored outcome stands). */
  readonly again: Recomputed | null;
  readonly outcome: JudgedOutcome;
}

function readingLine(x: Judged): string {
  const again = x.again ? `judged again ${x.again.outcome}: ${x.again.why}` : 'no series kept';
  return `${fmt(x.row.at)} reading #${x.row.seq} of ${x.row.gate} (stage ${x.row.stage}, read at ${fmt(x.row.readAt)}): stored ${x.row.outcome}; ${again}`;
}

/**
 * A tally's newest reading and passes in a row after each reading in turn, as
 * a tally counts them: the newest by the reading's own time (a later one of
 * equal time replaces it); a pass adds to the streak only when it is the
 * newest; a failure or an inconclusive reading ends it wherever it falls.
 */
export function tallySteps(readings: readonly Judged[]): { last: Judged; streak: number; after: Judged }[] {
  const out: { last: Judged; streak: number; after: Judged }[] = [];
  let last: Judged | null = null;
  let streak = 0;
  for (const x of readings) {
    const newest = last === null || x.row.readAt >= last.row.readAt;
    if (x.outcome !== 'pass') streak = 0;
    else if (newest) streak++;
    if (newest) last = x;
    out.push({ last: last!, streak, after: x });
  }
  return out;
}

export function checkJudged(h: ChaosHistory, v: Add): void {
  const s = h.store;
  if (!s.gateReadings) return;
  const rollouts = new Map(s.rollouts.map((r) => [r.id, r]));
  const gatesCache = new Map<string, JudgedGate[]>();
  const gatesAt = (r: RolloutRow, stage: number) => {
    const key = `${r.id}/${stage}`;
    if (!gatesCache.has(key)) gatesCache.set(key, judgedGatesOf(r, stage));
    return gatesCache.get(key)!;
  };

  // ── every judged reading, judged again ──
  const judged: Judged[] = [];
  for (const row of s.gateReadings) {
    const r = rollouts.get(row.rolloutId);
    const gate = r && gatesAt(r, row.stage).find((g) => g.name === row.gate);
    if (!gate) continue;
    const again = row.series ? recompute(gate.judge, row.series as unknown as KeptSeries) : null;
    const x: Judged = { row, again, outcome: again?.outcome ?? row.outcome };
    judged.push(x);
    if (again && again.outcome !== row.outcome) {
      v(
        'judged-reading-agrees',
        'safety',
        `gate ${row.gate} of ${row.rolloutId} (attempt ${row.attempt}, stage ${row.stage}) stored a ${row.outcome} where its series give ${again.outcome}`,
        [readingLine(x), ...(row.reason ? [`    its reason: ${row.reason.slice(0, 200)}`] : [])],
        row.at,
      );
    } else if (!again && row.outcome === 'pass') {
      v(
        'judged-reading-agrees',
        'safety',
        `gate ${row.gate} of ${row.rolloutId} (attempt ${row.attempt}, stage ${row.stage}) stored a pass with no series kept: nothing it could have been judged on`,
        [readingLine(x)],
        row.at,
      );
    }
  }
  const byGate = new Map<string, Judged[]>();
  for (const x of judged) {
    const key = `${x.row.rolloutId}/${x.row.attempt}/${x.row.stage}/${x.row.gate}`;
    byGate.set(key, [...(byGate.get(key) ?? []), x]);
  }

  // ── every promotion the system made ──
  const stageLine = (x: StageTransition) =>
    `${fmt(x.at)} stage ${x.rolloutId} attempt ${x.attempt} #${x.index} ${x.from ?? '∅'} → ${x.to}${x.by ? ` by ${x.by}` : ''}`;
  const leases = s.leaseChanges.filter((c) => c.name === 'promotion_leader').sort((a, b) => a.seq - b.seq);
  for (const p of s.stageTransitions) {
    if (p.to !== 'promoted' || p.from !== 'active' || !p.by?.startsWith('promoter:')) continue;
    const r = rollouts.get(p.rolloutId);
    const gates = r ? gatesAt(r, p.index).filter((g) => !g.dryRun) : [];
    if (!gates.length) continue;
    const activated = s.stageTransitions
      .filter((x) => x.rolloutId === p.rolloutId && x.attempt === p.attempt && x.index === p.index && x.to === 'active' && x.seq < p.seq)
      .at(-1);
    if (!activated) continue;
    const resumed = s.rolloutTransitions
      .filter(
        (x) =>
          x.rolloutId === p.rolloutId &&
          x.from?.state === 'paused' &&
          x.to.state === 'running' &&
          x.to.attempt === p.attempt &&
          x.seq > activated.seq &&
          x.seq < p.seq,
      )
      .at(-1);
    const start = resumed
      ? { seq: resumed.seq, at: resumed.at, line: `${fmt(resumed.at)} rollout ${p.rolloutId} resumed` }
      : { ...activated, line: stageLine(activated) };
    const moved = leases.some((c, i) => {
      if (c.seq <= start.seq || c.seq >= p.seq) return false;
      const before = leases[i - 1];
      return c.change === 'delete' || !before || before.holder !== c.holder || before.epoch !== c.epoch;
    });
    const strict = !moved && !resumed;
    const shortPass = r ? passOnShortData(h, r, p) : null;
    for (const g of gates) {
      const period = (byGate.get(`${p.rolloutId}/${p.attempt}/${p.index}/${g.name}`) ?? []).filter((x) => x.row.seq > start.seq && x.row.seq < p.seq);
      const where = `${p.rolloutId} attempt ${p.attempt} stage #${p.index}`;
      if (!period.length) {
        v(
          'promotion-judged-pass',
          'safety',
          `${where} was promoted with no reading of its judged gate ${g.name} in the stage's period`,
          [start.line, stageLine(p)],
          p.at,
        );
        continue;
      }
      const steps = tallySteps(period);
      const short = (x: (typeof steps)[number]) => x.last.outcome === 'inconclusive' && /^not enough data/.test(x.last.again?.why ?? x.last.row.reason ?? '');
      const passedShort = shortPass?.ok === true;
      const passed = (x: (typeof steps)[number]) => (x.last.outcome === 'pass' && x.streak >= g.consecutiveSuccesses) || (passedShort && short(x));
      const final = steps.at(-1)!;
      if (strict ? passed(final) : steps.some(passed)) continue;
      // The newest reading was short of data, but the promotion was no legitimate pass on it: say why not.
      if (shortPass && !shortPass.ok && (strict ? short(final) : steps.some(short))) {
        v(
          'promotion-judged-pass',
          'safety',
          `${where} was promoted while its judged gate ${g.name}'s newest reading was short of data, judged again, and ${shortPass.why}`,
          [start.line, ...period.slice(-4).map(readingLine), ...shortPass.evidence, stageLine(p)],
          p.at,
        );
        continue;
      }
      const need = g.consecutiveSuccesses > 1 ? ` (${g.consecutiveSuccesses} passes in a row needed; ${final.streak} at the end)` : '';
      const newest =
        final.last.outcome === 'pass'
          ? `'s newest reading passed, judged again, with ${final.streak} of the ${g.consecutiveSuccesses} passes in a row it needs (a failing or inconclusive reading ends them, even one logged late)`
          : `'s newest reading, judged again, was ${final.last.outcome}${need}`;
      v(
        'promotion-judged-pass',
        'safety',
        strict
          ? `${where} was promoted while its judged gate ${g.name}${newest}`
          : `${where} was promoted, and its judged gate ${g.name}'s tally never passed in the stage's period, judged again${need} (leadership moved or the rollout was resumed within the period: a reading logged after the promoter's view is not held against it)`,
        [start.line, ...period.slice(-4).map(readingLine), stageLine(p)],
        p.at,
      );
    }
  }
}

/**
 * Whether promotion `p` was made by `onInsufficientData: "pass"` as the spec allows it: null when the
 * stage's spec does not say pass; otherwise ok, or why not (with the events that show it).
 */
function passOnShortData(h: ChaosHistory, r: RolloutRow, p: StageTransition): { ok: boolean; why: string; evidence: string[] } | null {
  const stretch = r.stageStretch?.[p.index] ?? null;
  if (stretch?.onInsufficientData !== 'pass') return null;
  const events = h.store.events.filter((e) => e.rolloutId === p.rolloutId && e.detail.attempt === p.attempt);
  const indexOf = (e: EventRow) => (e.detail.stage as { index?: number } | undefined)?.index;
  const promoted = events.find((e) => e.detailType === 'ai.rollout.stage_promoted' && indexOf(e) === p.index);
  if (!promoted) return { ok: false, why: 'its stage_promoted event was not found', evidence: [] };
  const line = (e: EventRow) =>
    `${fmt(e.at)} event ${e.detailType.replace(/^ai\.rollout\./, '')}${typeof e.detail.insufficientData === 'string' ? ` (insufficientData: ${e.detail.insufficientData.slice(0, 160)})` : ''}`;
  if (typeof promoted.detail.insufficientData !== 'string')
    return { ok: false, why: 'its stage_promoted event does not say it passed on insufficient data', evidence: [line(promoted)] };
  const begun = events
    .filter((e) => e.at <= promoted.at && ((e.detailType === 'ai.rollout.stage_activated' && indexOf(e) === p.index) || e.detailType === 'ai.rollout.resumed'))
    .sort((a, b) => a.at - b.at)
    .at(-1);
  if (!begun) return { ok: false, why: "the event that began the stage's period was not found", evidence: [line(promoted)] };
  const waited = promoted.at - begun.at;
  if (waited < stretch.seconds * 1000)
    return {
      ok: false,
      why: `it passed on insufficient data ${fmt(waited)} into its period, before the stretch (${stretch.seconds} s) was over`,
      evidence: [line(begun), line(promoted)],
    };
  return { ok: true, why: '', evidence: [] };
}
