import type { CommandSpec } from '../command-spec.js';
import { authCommand } from './auth.js';
import { clusterCommand, statusCommand } from './cluster.js';
import { completionCommand } from './completion.js';
import { eventsCommand } from './events.js';
import { gatesCommand } from './gates.js';
import { rolloutsCommand } from './rollouts.js';
import { runsCommand } from './runs.js';
import { serveCommand } from './serve.js';
import { specCommand } from './spec.js';
import { startCommand } from './start.js';
import { storeCommand } from './store.js';
import { workerCommand } from './worker.js';

/** Every command of `rollout`, in the order help lists them. */
export const COMMAND_TABLE: readonly CommandSpec[] = [
  workerCommand,
  startCommand,
  serveCommand,
  statusCommand,
  clusterCommand,
  rolloutsCommand,
  eventsCommand,
  specCommand,
  gatesCommand,
  runsCommand,
  authCommand,
  storeCommand,
  completionCommand,
];

/** The program itself: its name, what it is, the one option of its own (commander adds `--help` everywhere), and its exit codes (main() in cli.ts). */
export const ROOT = {
  name: 'rollout',
  description: 'Progressive rollouts and distributed work runs, kept safe by fenced leases.',
  version: { flags: '-V, --version', description: 'print the version' },
  exitCodes:
    'Exit codes: 0 done (or stopped, or drained), 1 a runtime failure, 2 bad flags or configuration; `rollouts status`: 0 completed, 1 rolled back or aborted, 3 still going at --timeout; `gates judge`: 1 when a case is refused.',
} as const;
