/**
 * npm run bench -- api [--seconds S] [--rounds N] [--connections C]
 *
 * What authentication costs a read: two `rollout start` nodes (embedded
 * store, no demo, rate limits off), one with a tokens file and one without,
 * each holding one rollout; wrk (Debian's) drives GET /rollouts/<id> on each
 * in turn, `--rounds` windows of `--seconds` each, alternating which goes
 * first, so both see the same machine. The authenticated node gets a valid
 * bearer token on every request (a SHA-256 and a constant-time compare per
 * request); the other gets none. Prints requests/s per window and the ratio
 * of the medians. Last line: one JSON object.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '../../infra/local/processes.js';
import { mintToken } from '../../shared/auth/tokens.js';
import { builtCli } from './built.js';
import { percentile, round3 } from './raw.js';

const { values: args } = parseArgs({
  options: { seconds: { type: 'string', default: '5' }, rounds: { type: 'string', default: '5' }, connections: { type: 'string', default: '16' } },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const connections = Number(args.connections);
const root = resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'rollout-bench-api-'));
const reader = mintToken('bench', ['read', 'admin']);
writeFileSync(join(dir, 'tokens'), `${reader.line}\n`);

interface Node {
  readonly url: string;
  readonly process: ChildProcess;
  readonly headers: Record<string, string>;
}

async function start(auth: boolean): Promise<Node> {
  const port = await freePort();
  const flags = [
    'start',
    '--data-dir',
    'memory',
    '--no-demo',
    '--port',
    String(port),
    '--node-id',
    auth ? 'with-auth' : 'without-auth',
    '--rate-limit',
    '0',
    '--rate-limit-per-credential',
    '0',
    ...(auth ? ['--auth-tokens-file', join(dir, 'tokens')] : []),
  ];
  // As a user runs it: the built package.
  const child = spawn(process.execPath, [builtCli(), ...flags], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = `http://127.0.0.1:${port}`;
  await new Promise<void>((ready, fail) => {
    child.once('exit', (code) => fail(new Error(`node exited with ${code}`)));
    child.stdout.on('data', (c: Buffer) => c.toString().includes('status page') && ready());
  });
  const headers: Record<string, string> = auth ? { authorization: `Bearer ${reader.token}` } : {};
  const res = await fetch(`${url}/rollouts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ id: 'bench', spec: { target: { service: 's', version: 'v2' }, stages: [{ name: 'all', percent: 100, bakeSeconds: 3_600 }] } }),
  });
  if (res.status !== 201) throw new Error(`creating the rollout: HTTP ${res.status} ${await res.text()}`);
  return { url, process: child, headers };
}

function wrk(node: Node): number {
  const header = Object.entries(node.headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
  const r = spawnSync('wrk', ['-t', '1', '-c', String(connections), '-d', `${seconds}s`, ...header, `${node.url}/rollouts/bench`], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`wrk: ${r.stderr}`);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(r.stdout);
  if (non2xx) throw new Error(`wrk saw ${non2xx[1]} answers that were not 200:\n${r.stdout}`);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(r.stdout);
  if (!rps) throw new Error(`wrk printed no rate:\n${r.stdout}`);
  return Number(rps[1]);
}

if (spawnSync('wrk', ['--version']).error) {
  console.error('bench api needs wrk: sudo apt-get install -y wrk');
  process.exit(2);
}
const [withAuth, withoutAuth] = await Promise.all([start(true), start(false)]);
const authed: number[] = [];
const open: number[] = [];
try {
  // A short warm-up on each: JIT and the store's first reads out of the figures.
  spawnSync('wrk', ['-t', '1', '-c', '4', '-d', '1s', '-H', `authorization: Bearer ${reader.token}`, `${withAuth.url}/rollouts/bench`]);
  spawnSync('wrk', ['-t', '1', '-c', '4', '-d', '1s', `${withoutAuth.url}/rollouts/bench`]);
  for (let i = 0; i < rounds; i++) {
    const pair = i % 2 ? [withoutAuth, withAuth] : [withAuth, withoutAuth];
    for (const n of pair) (n === withAuth ? authed : open).push(wrk(n));
    console.log(`round ${i + 1}: authenticated ${authed.at(-1)!.toFixed(0)} req/s, unauthenticated ${open.at(-1)!.toFixed(0)} req/s`);
  }
} finally {
  withAuth.process.kill('SIGTERM');
  withoutAuth.process.kill('SIGTERM');
}
const med = (xs: number[]) => percentile(xs, 50);
const ratio = med(authed) / med(open);
console.log(`median: authenticated ${med(authed).toFixed(0)} req/s, unauthenticated ${med(open).toFixed(0)} req/s: ${ratio.toFixed(3)}× (goal ≥ 0.9×)`);
console.log(
  JSON.stringify({
    bench: 'api',
    seconds,
    rounds,
    connections,
    authenticated_rps: authed.map(round3),
    unauthenticated_rps: open.map(round3),
    authenticated_median_rps: round3(med(authed)),
    unauthenticated_median_rps: round3(med(open)),
    ratio: round3(ratio),
  }),
);
process.exit(0);
