#!/usr/bin/env node
import { Command } from 'commander';
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { ApiError } from '../../client/transport.js';
import { ConfigError } from '../../errors.js';
import { errorMessage } from '../../log.js';
import { addCommand } from './command-spec.js';
import { COMMAND_TABLE, ROOT } from './commands/index.js';
import { ExitCode, UsageError } from './errors.js';
import { packageVersion } from './version.js';

export { completionScript } from './completion.js';
export { duration } from './parsers.js';
export { ExitCode } from './errors.js';

/**
 * The `rollout` command. Exit codes: 0 done (or stopped, or drained), 1 a
 * runtime failure, 2 bad flags or configuration; `rollouts status`: 0
 * completed, 1 rolled back or aborted, 3 still going at --timeout.
 *
 * The commands are declared as data in commands/ (one module per resource or
 * verb); this entry builds them into commander and maps failures to exit codes.
 */

export function program(): Command {
  const cli = new Command(ROOT.name)
    .description(ROOT.description)
    .version(packageVersion(), ROOT.version.flags, ROOT.version.description)
    .showHelpAfterError('(add --help for usage)')
    // Before the subcommands: they inherit it, so a usage error returns here (exit 2) instead of exiting.
    .exitOverride();
  for (const spec of COMMAND_TABLE) addCommand(cli, spec);
  return cli;
}

export async function main(argv: readonly string[]): Promise<number> {
  try {
    await program().parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (err instanceof ExitCode) return err.code;
    if (code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help') return 0;
    if (typeof code === 'string' && code.startsWith('commander.')) return 2;
    process.stderr.write(`rollout: ${errorMessage(err)}\n`);
    if (err instanceof UsageError) return 2;
    if (err instanceof ApiError) return err.status === 400 ? 2 : 1;
    return err instanceof ConfigError ? 2 : 1;
  }
}

// Through npm's bin link the script is named by the link: compared by real path.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  // A reader that went away (a pipe into `head`, a supervisor that closed its end) is not a crash of a node or worker: what it would have read is dropped.
  for (const out of [process.stdout, process.stderr]) {
    out.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
    });
  }
  // Exit explicitly: idle keep-alive sockets of the AWS SDK would hold the process open.
  process.exit(await main(process.argv.slice(2)));
}
