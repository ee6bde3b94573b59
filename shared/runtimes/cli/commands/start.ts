import type { CommandSpec } from '../command-spec.js';
import { quiet, stderrLogger } from '../io.js';
import { int } from '../parsers.js';
import { TRUST_OPTIONS, trustConfig, withoutTrust, type TrustOpts } from '../trust.js';
import { UsageError } from '../errors.js';

/** `rollout start` (`npm start`): the whole control plane on one machine. */
export const startCommand: CommandSpec = {
  name: 'start',
  description:
    'Run the control plane on this machine: embedded PostgreSQL (PGlite) in --data-dir, both promoters, the coordinator, in-process workers, the API and status page; with a demo unless --no-demo',
  options: [
    ...TRUST_OPTIONS,
    { flags: '--data-dir <dir>', description: 'where the embedded database lives (state survives a restart); "memory" keeps nothing', default: './.rollout' },
    { flags: '--port <port>', description: 'HTTP port', parser: int('--port'), env: 'ROLLOUT_PORT', default: 8000 },
    { flags: '--host <host>', description: 'interface to listen on', env: 'ROLLOUT_HOST', default: '127.0.0.1' },
    { flags: '--node-id <id>', description: 'this node', default: 'local-1' },
    { flags: '--no-demo', description: 'start empty: no demo rollout or run' },
    { flags: '--demo-items <n>', description: 'items in the demo run', parser: int('--demo-items'), default: 300 },
    { flags: '--demo-bake-seconds <s>', description: 'bake time of each demo stage', parser: int('--demo-bake-seconds'), default: 3 },
    { flags: '--workers <n>', description: 'in-process workers per open run', parser: int('--workers'), default: 3 },
    { flags: '--item-ms <ms>', description: 'mock backend: time per item', parser: int('--item-ms'), default: 25 },
    { flags: '--exit-after-demo', description: 'stop once the demo has finished', default: false },
    { flags: '--json', description: 'logs as JSON lines', default: false },
  ],
  action: async (
    o: TrustOpts & {
      dataDir: string;
      port: number;
      host: string;
      nodeId: string;
      demo: boolean;
      demoItems: number;
      demoBakeSeconds: number;
      workers: number;
      itemMs: number;
      exitAfterDemo: boolean;
      json: boolean;
    },
  ) => {
    if (o.workers < 1) throw new UsageError('--workers must be at least 1');
    if (o.demoItems < 1) throw new UsageError('--demo-items must be at least 1');
    const logger = quiet(stderrLogger(o.json, 'rollout-node', { nodeId: o.nodeId }));
    // Loaded on use: the worker fleet's bundle of this command carries only what `worker` needs.
    const node = await import('../../node/node-command.js');
    await node.startCommand({ ...withoutTrust(o), dataDir: o.dataDir === 'memory' ? null : o.dataDir, trust: trustConfig(o) }, logger);
  },
};
