import type { CommandSpec, OptionSpec } from '../command-spec.js';
import { quiet, stderrLogger } from '../io.js';
import { int } from '../parsers.js';
import { TRUST_OPTIONS, trustConfig, type TrustOpts } from '../trust.js';
import { UsageError } from '../errors.js';
import type { StartExtension } from '../../node/node-command.js';

/**
 * What a checkout's `npm start` adds to this command (tools/demo/start.ts: the
 * demo, which is not shipped): its flags, and the extension it makes of them.
 * Installed before the command line is parsed; the installed `rollout start`
 * has none.
 */
export interface StartAddition {
  /** Said after the command's own description. */
  readonly description: string;
  readonly options: readonly OptionSpec[];
  /** The extension for the parsed options, its own among them (a bad one refused with a UsageError naming it); null: none this time. */
  extension(o: object): StartExtension | null;
}

let addition: StartAddition | null = null;

export function installStartAddition(a: StartAddition): void {
  addition = a;
}

/**
 * The demo's flags, where the demo is not (the installed package): refused,
 * saying where it runs. `--no-demo` asks for what this command does anyway, so
 * scripts written for `npm start` run unchanged.
 */
const DEMO_ELSEWHERE = "npm start's demo only, from a checkout of the repository: refused here";
const WITHOUT_DEMO: readonly OptionSpec[] = [
  { flags: '--no-demo', description: 'start empty (this command has no demo: that is npm start, from a checkout of the repository)' },
  { flags: '--demo-items <n>', description: DEMO_ELSEWHERE },
  { flags: '--demo-bake-seconds <s>', description: DEMO_ELSEWHERE },
  { flags: '--exit-after-demo', description: DEMO_ELSEWHERE },
];
const REFUSED = [
  ['demoItems', '--demo-items'],
  ['demoBakeSeconds', '--demo-bake-seconds'],
  ['exitAfterDemo', '--exit-after-demo'],
] as const;

const HEAD: readonly OptionSpec[] = [
  ...TRUST_OPTIONS,
  { flags: '--data-dir <dir>', description: 'where the embedded database lives (state survives a restart); "memory" keeps nothing', default: './.rollout' },
  { flags: '--port <port>', description: 'HTTP port', parser: int('--port'), env: 'ROLLOUT_PORT', default: 8000 },
  { flags: '--host <host>', description: 'interface to listen on', env: 'ROLLOUT_HOST', default: '127.0.0.1' },
  { flags: '--node-id <id>', description: 'this node', default: 'local-1' },
];
const TAIL: readonly OptionSpec[] = [
  {
    flags: '--workers <n>',
    description: 'in-process mock workers per open run: they complete every item with a made-up result; 0 runs none',
    parser: int('--workers'),
    default: 3,
  },
  { flags: '--item-ms <ms>', description: 'mock backend: time per item', parser: int('--item-ms'), default: 25 },
  { flags: '--json', description: 'logs as JSON lines', default: false },
];

type StartOpts = TrustOpts & {
  dataDir: string;
  port: number;
  host: string;
  nodeId: string;
  workers: number;
  itemMs: number;
  json: boolean;
  /** Given only where there is no demo (the installed package), to be refused. */
  demoItems?: unknown;
  demoBakeSeconds?: unknown;
  exitAfterDemo?: unknown;
};

/** `rollout start` (`npm start`): the whole control plane on one machine. */
export const startCommand: CommandSpec = {
  name: 'start',
  // Read when commander is built (program()), after an addition was installed.
  get description() {
    return `Run the control plane on this machine: embedded PostgreSQL (PGlite) in --data-dir, both promoters, the coordinator, in-process workers, the API and status page${addition?.description ?? ''}`;
  },
  get options() {
    return [...HEAD, ...(addition?.options ?? WITHOUT_DEMO), ...TAIL];
  },
  action: async (o: StartOpts) => {
    if (o.workers < 0) throw new UsageError(`--workers: 0 or more, got ${o.workers}`);
    if (!addition)
      for (const [key, flag] of REFUSED)
        if (o[key] !== undefined) throw new UsageError(`${flag}: the demo runs from a checkout of the repository, with npm start`);
    const extension = addition?.extension(o) ?? undefined;
    const logger = quiet(stderrLogger(o.json, 'rollout-node', { nodeId: o.nodeId }));
    // Loaded on use: the worker fleet's bundle of this command carries only what `worker` needs.
    const node = await import('../../node/node-command.js');
    const { dataDir, host, port, nodeId, workers, itemMs } = o;
    await node.startCommand(
      { dataDir: dataDir === 'memory' ? null : dataDir, host, port, nodeId, workers, itemMs, trust: trustConfig(o) },
      logger,
      process.stdout,
      extension,
    );
  },
};
