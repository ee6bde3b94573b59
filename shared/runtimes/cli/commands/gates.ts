import { readFileSync } from 'node:fs';
import { errorMessage } from '../../../log.js';
import type { GateReading } from '../../../rollout/gates.js';
import type { CommandSpec } from '../command-spec.js';
import { run, TARGET_OPTIONS, type ClientOpts } from '../client-options.js';
import { ExitCode, UsageError } from '../errors.js';
import { int } from '../parsers.js';

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
      name: 'judge',
      description:
        'Judge each case of a {"cases": [...]} file (mann-whitney, sequential-rate): one JSON line per case on stdout, in order; exit 1 when a case is refused, 2 when the file is unusable',
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
