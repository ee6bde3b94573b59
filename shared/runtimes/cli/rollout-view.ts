import type { ActuationJson, GateJson, RolloutJson } from '../../api/rollout-json.js';
import type { HistoryEntryJson } from '../../client/client.js';
import { own } from '../../own.js';
import { readingInterval } from '../../judge/gate.js';
import { table } from './io.js';

/**
 * `rollout rollouts get`: a rollout as a tree, the way one reads it while it
 * runs. Its state and what it waits for; each stage with its percent, phase
 * and bake (elapsed, and what is left of the active one); under a stage, its
 * gates' newest readings against their thresholds, its alarms and its pushed
 * metrics; what each target carries; the last transitions. `now` only
 * measures the bake: everything else is what the server answered.
 */
export function rolloutTree(r: RolloutJson, history: readonly HistoryEntryJson[] | null, now: number): string {
  const { target } = r.spec;
  const head = [
    `${r.id}  ${r.state}${r.stateReason ? `  (${r.stateReason})` : ''}  attempt ${r.attempt}`,
    `${target.service}: ${target.stableVersion ?? '-'} → ${target.version}`,
    ...(r.waiting.length ? ['waiting for:', ...r.waiting.map((w) => `  - ${w}`)] : []),
  ];
  const width = Math.max(...r.stages.map((s) => s.name.length));
  const stages = r.stages.flatMap((st, i) => {
    const spec = r.spec.stages[i]!;
    const lines = [`${PHASE_MARK[st.phase]} ${st.name.padEnd(width)}  ${`${spec.percent}%`.padStart(4)}  ${st.phase.padEnd(11)}  ${bake(st, spec, now)}`];
    // The signals a stage was judged on, once it has been active: the active one's in its current period.
    if (st.phase !== 'pending') {
      // Each detail is a line and its continuations (a gate's query), drawn under the stage.
      const details: string[][] = [
        // A stage promoted on less than its gates ask (onInsufficientData pass) says so first.
        ...(st.phase === 'promoted' && st.reason ? [[st.reason]] : []),
        ...r.gates.filter((g) => g.stage === i).map((g) => [gateLine(g), `  ${g.query}`]),
        ...[...new Set(spec.gates.alarms)].map((a) => [`alarm ${a}: ${own(r.alarms, a) ?? 'not reported'}`]),
        ...metricsLine(r, i).map((m) => [m]),
      ];
      details.forEach(([first, ...more], n) => {
        const last = n === details.length - 1;
        lines.push(`│ ${last ? '└' : '├'} ${first}`, ...more.map((l) => `│ ${last ? ' ' : '│'} ${l}`));
      });
    }
    return lines;
  });
  return [
    ...head,
    '',
    'stages',
    ...stages,
    ...(r.actuation?.length ? ['', 'actuation', actuationTable(r.actuation)] : []),
    ...(history?.length ? ['', 'last transitions', transitions(history.slice(-5))] : []),
  ].join('\n');
}

const PHASE_MARK: Record<RolloutJson['stages'][number]['phase'], string> = { pending: '○', active: '●', promoted: '✔', rolled_back: '✖' };

const secs = (ms: number) => `${Math.max(0, Math.round(ms / 1000))} s`;

/** How long the stage has baked of its bakeSeconds, and what is left of the active one's. */
function bake(st: RolloutJson['stages'][number], spec: RolloutJson['spec']['stages'][number], now: number): string {
  if (st.activatedAt === null) return `bake ${spec.bakeSeconds} s`;
  const elapsed = (st.promotedAt ?? st.rolledBackAt ?? now) - st.activatedAt;
  const left = st.phase === 'active' ? spec.bakeSeconds * 1000 - elapsed : 0;
  return `bake ${secs(elapsed)} of ${spec.bakeSeconds} s${left > 0 ? `, ${secs(left)} left` : ''}`;
}

/** A gate's newest reading of the stage's period against what it asks, its tally against its limits, and why, when it did not pass. */
function gateLine(g: GateJson): string {
  const ci = g.judge === 'mann-whitney' ? readingInterval(g.last?.answer) : null;
  const value = g.last ? `${g.last.value ?? '-'}${ci ? ` [${ci[0]}, ${ci[1]}]` : ''}` : 'no reading';
  const asks = g.comparison !== null && g.threshold !== null ? ` (passes when ${g.comparison} ${g.threshold})` : '';
  const counts = `${g.counts.readings} readings, ${g.counts.failures} failed, ${g.counts.inconclusive} inconclusive (failureLimit ${g.failureLimit}, inconclusiveLimit ${g.inconclusiveLimit})`;
  const streak = g.consecutiveSuccesses > 1 ? ` · ${g.counts.passStreak} of ${g.consecutiveSuccesses} passes in a row` : '';
  const why = g.last && g.last.outcome !== 'pass' && g.last.reason ? ` · last: ${g.last.reason}` : '';
  const kind = [g.type, g.judge, g.rolloutWide ? 'rollout-wide' : null].filter(Boolean).join(', ');
  return `gate ${g.name} (${kind}): ${g.status} · ${value}${asks} · ${counts}${streak}${why}`;
}

/** The stage's pushed reading against its thresholds. */
function metricsLine(r: RolloutJson, stage: number): string[] {
  const m = own(r.metrics, String(stage));
  const g = r.spec.stages[stage]!.gates;
  const limits = [
    g.minRequests ? `minRequests ${g.minRequests}` : null,
    g.maxErrorRate !== undefined ? `maxErrorRate ${g.maxErrorRate}` : null,
    g.maxP99LatencyMs !== undefined ? `maxP99LatencyMs ${g.maxP99LatencyMs}` : null,
  ].filter((x) => x !== null);
  if (!m && !limits.length) return [];
  const seen = m
    ? `${m.requests} requests, ${m.errors} errors${m.requests ? ` (${((100 * m.errors) / m.requests).toFixed(2)} %)` : ''}${m.p99LatencyMs !== null ? `, p99 ${m.p99LatencyMs} ms` : ''}`
    : 'none reported';
  return [`metrics: ${seen}${limits.length ? ` · ${limits.join(', ')}` : ''}`];
}

/** What each target was asked to carry and what it was last found carrying. */
export const actuationTable = (rows: readonly ActuationJson[]) =>
  table(
    rows.map((a) => ({
      target: a.target,
      kind: a.kind,
      state: a.state,
      applied: a.final ? 'final' : `${a.percent}%`,
      found: a.observed ? (a.observed.final ? 'final' : `${a.observed.percent}%`) : '-',
      at: a.appliedAt ?? '-',
      reason: a.reason ?? '',
    })),
    ['target', 'kind', 'state', 'applied', 'found', 'at', 'reason'],
  );

export const transitions = (history: readonly HistoryEntryJson[]) =>
  table(
    history.map((h) => ({
      at: h.at,
      event: h.type.replace(/^ai\.rollout\./, ''),
      stage: h.stage ? `${h.stage.name} ${h.stage.percent}%` : '',
      actor: h.actor,
      epoch: h.epoch,
      reason: h.reason ?? (h.insufficientData ? `passed on insufficient data: ${h.insufficientData}` : ''),
    })),
    ['at', 'event', 'stage', 'actor', 'epoch', 'reason'],
  );
