import { readFileSync } from 'node:fs';
import { errorMessage } from '../../../log.js';
import type { CommandSpec } from '../command-spec.js';
import { ExitCode, UsageError } from '../errors.js';

/** `rollout gates`: the judges a gate uses, run on this machine, for pipelines, notebooks and tests. */
export const gatesCommand: CommandSpec = {
  name: 'gates',
  description: "The gates' judges, run on this machine",
  commands: [
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
