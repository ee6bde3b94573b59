/**
 * A suite run on a busy machine: one CPU busy-loop per core beside
 * `run.ts <mode> <files…>`, so timing assumptions that only hold on an idle
 * host show up here rather than on a loaded CI runner.
 *
 *   npm run test:busy -- <mode> [files…]     e.g. npm run test:busy -- e2e test/e2e/chaos.test.ts
 *
 * The burners are always stopped (on success, failure, Ctrl-C and SIGTERM),
 * and each also stops by itself once this process is gone. Exits with the
 * suite's code.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../..');
const MODES = ['unit', 'contract', 'integration', 'e2e', 'security', 'infra', 'smoke', 'chaos', 'all'];

const [mode, ...files] = process.argv.slice(2);
if (!mode || !MODES.includes(mode)) {
  console.error(`usage: npm run test:busy -- <${MODES.join('|')}> [files…]\n  got: ${mode ?? '(no mode)'}`);
  process.exit(2);
}

// Spins in 200 ms slices, and between them leaves if its parent is gone (a SIGKILLed parent cannot stop it).
const BURN = 'const p = process.ppid; for (;;) { const until = Date.now() + 200; while (Date.now() < until); if (process.ppid !== p) process.exit(0); }';
const cores = availableParallelism();
const burners: ChildProcess[] = Array.from({ length: cores }, () => spawn(process.execPath, ['-e', BURN], { stdio: 'ignore' }));
console.error(`[busy] ${cores} CPU burners (pids ${burners.map((b) => b.pid).join(', ')}) beside: run.ts ${[mode, ...files].join(' ')}`);

function stopBurners(): void {
  for (const b of burners) if (b.exitCode === null && b.signalCode === null) b.kill('SIGKILL');
}
process.on('exit', stopBurners);

const suite = spawn(process.execPath, ['--import', 'tsx', resolve(root, 'test/harness/run.ts'), mode, ...files], { cwd: root, stdio: 'inherit' });

// Ctrl-C and SIGTERM go to the suite, whose harness stops its services; the burners stop at once.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    stopBurners();
    if (suite.exitCode === null && suite.signalCode === null) suite.kill(signal);
  });
}

suite.on('error', (err) => {
  console.error(`[busy] could not start the suite: ${err.message}`);
  stopBurners();
  process.exit(1);
});
suite.on('exit', (code, signal) => {
  stopBurners();
  console.error(`[busy] suite ${signal ? `stopped by ${signal}` : `exited with code ${code}`}`);
  process.exit(code ?? 1);
});
