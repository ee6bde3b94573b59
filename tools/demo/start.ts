/**
 * `npm start`: `rollout start` with the demo (demo.ts) installed. The demo
 * lives here, beside the repository's tests, not in the package: the
 * installed `rollout start` has none.
 *
 *   node --import tsx tools/demo/start.ts [rollout start's options] [--no-demo] [--demo-items 300] [--demo-bake-seconds 3] [--exit-after-demo]
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { main } from '../../shared/runtimes/cli/cli.js';
import type { OptionSpec } from '../../shared/runtimes/cli/command-spec.js';
import { installStartAddition, type StartAddition } from '../../shared/runtimes/cli/commands/start.js';
import { UsageError } from '../../shared/runtimes/cli/errors.js';
import { int } from '../../shared/runtimes/cli/parsers.js';
import type { StartExtension } from '../../shared/runtimes/node/node-command.js';
import { Demo, printProgress, startDemoTarget } from './demo.js';

export interface DemoStartOptions {
  readonly items: number;
  readonly bakeSeconds: number;
  /** Stop once the demo has finished (for scripts and tests). */
  readonly exitAfterDemo: boolean;
}

/**
 * The demo as a start's extension: its nginx declared as the target `web`
 * before the node opens, then the rollout, the run and the fleet once it
 * serves, with live progress until the stop.
 */
export function demoExtension(o: DemoStartOptions): StartExtension {
  let web: Awaited<ReturnType<typeof startDemoTarget>> | null = null;
  return {
    async targetsBeforeStart(declared) {
      web = await startDemoTarget(declared);
      const target = web.target;
      return { targets: target ? { [target.name]: target.config } : {}, stop: () => target?.stop() ?? Promise.resolve() };
    },
    async afterStart({ node, pool, url, workers, logger, out, stop }) {
      const demo = new Demo(node, pool, { items: o.items, bakeSeconds: o.bakeSeconds, url, target: web?.target?.name ?? null });
      await demo.start();
      out.write(`demo: a 4-stage rollout and a run of ${o.items} items on ${workers} workers (watch ${url})\n`);
      for (const line of [...(web ? [web.note] : []), ...demo.notes]) out.write(`${line}\n`);
      const printer = printProgress(demo, out, url, logger, () => {
        if (o.exitAfterDemo) stop();
        else out.write(`still serving ${url} — Ctrl-C to stop\n`);
      });
      return { printer, stop: () => demo.stop() };
    },
  };
}

const DEMO_OPTIONS: readonly OptionSpec[] = [
  { flags: '--no-demo', description: 'start empty: no demo rollout or run' },
  { flags: '--demo-items <n>', description: 'items in the demo run', parser: int('--demo-items'), default: 300 },
  { flags: '--demo-bake-seconds <s>', description: 'bake time of each demo stage', parser: int('--demo-bake-seconds'), default: 3 },
  { flags: '--exit-after-demo', description: 'stop once the demo has finished', default: false },
];

export const demoAddition: StartAddition = {
  description: '; with a demo unless --no-demo',
  options: DEMO_OPTIONS,
  extension(parsed) {
    const o = parsed as { demo: boolean; demoItems: number; demoBakeSeconds: number; exitAfterDemo: boolean };
    if (o.demoItems < 1) throw new UsageError('--demo-items must be at least 1');
    if (!o.demo) return null;
    return demoExtension({ items: o.demoItems, bakeSeconds: o.demoBakeSeconds, exitAfterDemo: o.exitAfterDemo });
  },
};

// Run, not imported: as cli.ts does for `rollout`.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  // A reader that went away (a pipe into `head`) is not a crash: what it would have read is dropped.
  for (const out of [process.stdout, process.stderr]) {
    out.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
    });
  }
  installStartAddition(demoAddition);
  process.exit(await main(['start', ...process.argv.slice(2)]));
}
