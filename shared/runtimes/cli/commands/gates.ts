import { readFileSync } from 'node:fs';
import { errorMessage } from '../../../log.js';
import { InvalidArgumentError } from 'commander';
import type { RolloutClient } from '../../../client/client.js';
import type { BacktestRow } from '../../../rollout/backtest.js';
import type { GateReading } from '../../../rollout/gates.js';
import type { CommandSpec } from '../command-spec.js';
import { run, TARGET_OPTIONS, targetOf, type ClientOpts } from '../client-options.js';
import { ExitCode, UsageError } from '../errors.js';
import { days, int } from '../parsers.js';
import { readJsonFile } from '../io.js';
import { MAX_SERIES_READINGS } from '../../../api/routes/rollouts.js';
import { gateJudgeOf } from '../../../rollout/gate-spec.js';

/** `rollout gates`: the judges a gate uses, run on this machine, for pipelines, notebooks and tests. */
export const gatesCommand: CommandSpec = {
  name: 'gates',
  description: "The gates' judges, run on this machine",
  commands: [
    {
      name: 'test',
      description:
        "Read one of a rollout's gates now and print its judgement, as the promoter would make it (the active stage's, or --stage's); nothing is stored or acted on",
      arguments: [{ name: '<rollout>' }, { name: '<gate>' }],
      options: [{ flags: '--stage <index>', description: 'read it for this stage (default: the active one)', parser: int('--stage') }, ...TARGET_OPTIONS],
      action: (rollout: string, gate: string, o: ClientOpts & { stage?: number }) =>
        run(
          o,
          'POST',
          `/rollouts/${encodeURIComponent(rollout)}/gates/${encodeURIComponent(gate)}/test${o.stage === undefined ? '' : `?stage=${o.stage}`}`,
          undefined,
          (r) => readingLines((r as { stage: number; reading: GateReading }).reading),
        ),
    },
    {
      name: 'backtest',
      description:
        "Replay a proposed gate over the stored readings of past rollouts (of a gate of the same name, or --as's) and print what it would have decided against what happened: caught, false alarm, missed, agreed",
      options: [
        { flags: '--gate <gate.json>', description: 'the proposed gate (a provider gate, as in a stage)', required: true },
        { flags: '--as <name>', description: "replay the readings of this gate (default: the proposed gate's name)" },
        {
          flags: '--since <days>',
          description: 'rollouts created in the last this many days (30 or 30d)',
          parser: (v: string) => days('--since')(v.replace(/d$/, '')),
          default: 30,
        },
        { flags: '--rollouts <ids>', description: 'these rollouts (comma-separated) instead of --since' },
        { flags: '--max <n>', description: 'at most this many rollouts, newest first (1–10000)', parser: between('--max', 1, 10_000), default: 200 },
        ...TARGET_OPTIONS,
      ],
      action: async (o: ClientOpts & { gate: string; as?: string; since: number; rollouts?: string; max: number }) => {
        const [{ providerGateSchema }, { parseConfig }, { backtestRow, backtestSummary }, { RolloutClient }] = await Promise.all([
          import('../../../rollout/gate-spec.js'),
          import('../../../config.js'),
          import('../../../rollout/backtest.js'),
          import('../../../client/client.js'),
        ]);
        const parsed = parseConfig('gate', providerGateSchema, readJsonFile(o.gate));
        const proposed = o.as === undefined ? parsed : { ...parsed, name: o.as };
        const client = new RolloutClient(targetOf(o));
        const ids =
          o.rollouts
            ?.split(',')
            .map((x) => x.trim())
            .filter(Boolean) ?? (await recentRollouts(client, Date.now() - o.since * 86_400_000, o.max));
        const rows: BacktestRow[] = [];
        for (const id of ids.slice(0, o.max)) {
          let r;
          try {
            r = await client.getRollout(id);
          } catch (err) {
            // One rollout gone (retention) or mistyped does not end the backtest: it is said, and counted as unknown.
            process.stderr.write(`${id}: ${errorMessage(err)}\n`);
            rows.push(unreadRow(id, errorMessage(err)));
            continue;
          }
          // A judged proposal is judged again on each reading's series: fewer readings a stage fit in one answer.
          const judged = gateJudgeOf(proposed) !== null;
          const limit = judged ? MAX_SERIES_READINGS : READINGS_READ;
          const { readings, seriesOmitted } = await client.readings(id, { gate: proposed.name, limit, series: judged });
          const full = new Set(readings.map((x) => x.stage)).size * limit;
          if (readings.length && readings.length >= full)
            process.stderr.write(`${id}: only the newest ${limit} readings of each stage are replayed; older ones are not\n`);
          if (seriesOmitted)
            process.stderr.write(`${id}: ${seriesOmitted} older readings came without their series (the answer's size limit); they are replayed as stored\n`);
          rows.push(backtestRow(proposed, r, readings));
        }
        const summary = backtestSummary(rows);
        if (o.json) {
          process.stdout.write(`${rows.map((r) => JSON.stringify(r)).join('\n')}${rows.length ? '\n' : ''}${JSON.stringify({ summary })}\n`);
          return;
        }
        const mins = (ms: number) => `${Math.round(ms / 60_000)} min`;
        for (const r of rows) {
          const would =
            r.replayed.kind === 'stop'
              ? `would ${{ rollback: 'roll back', pause: 'pause', hold: 'hold' }[r.replayed.action]} in stage ${r.replayed.stage} at ${new Date(r.replayed.at).toISOString()}: ${r.replayed.reason}`
              : r.replayed.kind === 'pass'
                ? `would pass (${r.replayed.readings} readings in ${r.replayed.stages} stages)`
                : `nothing to replay: ${r.replayed.reason}`;
          const earlier = r.earlierMs !== null ? `, ${mins(r.earlierMs)} before it ended` : '';
          process.stdout.write(`${r.rollout}  ${r.outcome ?? 'not read'}  ${r.verdict}${earlier}\n  ${would}\n`);
        }
        process.stdout.write(
          `${rows.length} rollouts: ${summary.caught} caught, ${summary.falseAlarm} false alarms, ${summary.missed} missed, ${summary.agreed} agreed, ${summary.unknown} unknown\n`,
        );
      },
    },
    {
      name: 'judge',
      description:
        'Judge each case of a {"cases": [...]} file (mann-whitney, sequential-rate, sample-ratio): one JSON line per case on stdout, in order; exit 1 when a case is refused, 2 when the file is unusable',
      options: [{ flags: '--file <cases.json>', description: 'the cases', required: true }],
      action: async (o: { file: string }) => {
        const { CasesFileError, judgeCases } = await import('../../../judge/cases.js');
        let text: string;
        try {
          text = readFileSync(o.file, 'utf8');
        } catch (err) {
          throw new UsageError(`cannot read ${o.file}: ${errorMessage(err)}`);
        }
        let answers;
        try {
          answers = judgeCases(text);
        } catch (err) {
          if (err instanceof CasesFileError) throw new UsageError(`${o.file}: ${err.message}`);
          throw err;
        }
        process.stdout.write(answers.map((a) => `${JSON.stringify(a)}\n`).join(''));
        const refused = answers.filter((a) => 'error' in a);
        if (refused.length) {
          process.stderr.write(`${refused.length} of ${answers.length} cases refused\n`);
          throw new ExitCode(1);
        }
      },
    },
  ],
};

/** A reading in lines a person reads: the outcome and value, why, what was asked and what came back. */
function readingLines(r: GateReading): string {
  return [
    `gate ${r.gate} (${r.type}), stage ${r.stage}: ${r.outcome}${r.value === null ? '' : ` · ${r.value}`}`,
    ...(r.reason ? [`why: ${r.reason}`] : []),
    `asked: ${r.query}`,
    ...(r.answer ? [`answer: ${r.answer}`] : []),
    '(not stored: a test reading counts towards nothing)',
  ].join('\n');
}

/** The ids of rollouts created since `since` (ms), newest first, at most `max`. */
async function recentRollouts(client: RolloutClient, since: number, max: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await client.rolloutsPage({ limit: Math.min(500, max), ...(cursor ? { cursor } : {}) });
    for (const r of page.rollouts) {
      if (ids.length >= max) return ids;
      if (r.createdAt === null) continue;
      // Newest first by creation: the first one older than `since` ends the list.
      if (Date.parse(r.createdAt) < since) return ids;
      ids.push(r.id);
    }
    if (!page.next) return ids;
    cursor = page.next;
  }
}

/** Readings of the gate a backtest reads for each stage of a rollout (the API's most). */
const READINGS_READ = 2_000;

/** A rollout the backtest could not read. */
function unreadRow(id: string, why: string): BacktestRow {
  return { rollout: id, outcome: null, reason: null, replayed: { kind: 'none', reason: `not read: ${why}` }, verdict: 'unknown', earlierMs: null };
}

/** A whole number within [lo, hi], for a flag. */
function between(name: string, lo: number, hi: number): (v: string) => number {
  return (v) => {
    const n = int(name)(v);
    if (n < lo || n > hi) throw new InvalidArgumentError(`${name} must be from ${lo} to ${hi}, got ${n}`);
    return n;
  };
}
