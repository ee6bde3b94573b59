/**
 * nginx splitting real traffic between two versions of a tiny service, for
 * the nginx actuator's tests, its benchmark and the local demo: two HTTP
 * servers answer their version's name, and nginx proxies each request to
 * the upstream the actuator's include picks by the request's `X-Entity`
 * header (falling back to the client address).
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NginxTarget } from '../../shared/actuation/targets.js';
import { collect, exited, freePort, waitFor } from '../../shared/runtimes/node/processes.js';

export interface SplitNginx {
  /** nginx's URL: every request goes to stable or canary by the include. */
  readonly url: string;
  /** The target as an operator would declare it for this nginx. */
  readonly target: NginxTarget;
  /** The version that answered a request with this entity key. */
  ask(entity: string): Promise<'stable' | 'canary'>;
  /** The share (0–100, two decimals) of `entities` distinct keys answered by canary. */
  measure(entities: number, prefix?: string): Promise<number>;
  stop(): Promise<void>;
}

/** How a version serves a request before it answers (a test's latency, its metrics): by default at once. */
export type Serve = (version: 'stable' | 'canary') => Promise<void> | void;

function version(name: 'stable' | 'canary', serve?: Serve): Promise<{ server: Server; port: number }> {
  const server = createServer((_req, res) => {
    const answer = () => {
      res.writeHead(200, { 'content-type': 'text/plain', 'x-version': name });
      res.end(name);
    };
    if (!serve) return answer();
    Promise.resolve(serve(name)).then(answer, (err: unknown) => res.writeHead(500).end(String(err)));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port })));
}

export async function startSplitNginx(o: { port?: number; serve?: Serve } = {}): Promise<SplitNginx> {
  const dir = mkdtempSync(join(tmpdir(), 'rollout-split-'));
  for (const sub of ['tmp/body', 'tmp/proxy', 'tmp/fastcgi', 'tmp/uwsgi', 'tmp/scgi']) mkdirSync(join(dir, sub), { recursive: true });
  chmodSync(dir, 0o755);
  const [stable, canary] = await Promise.all([version('stable', o.serve), version('canary', o.serve)]);
  const port = o.port ?? (await freePort());
  const include = join(dir, 'split.conf');
  const conf = join(dir, 'nginx.conf');
  const target: NginxTarget = {
    type: 'nginx',
    include,
    variable: 'rollout_upstream',
    key: '${http_x_entity}${remote_addr}',
    stableUpstream: 'stable',
    canaryUpstream: 'canary',
    nginx: nginxBinary(),
    config: conf,
    prefix: dir,
    errorLog: join(dir, 'error.log'),
  };
  // At rest, as an operator would have it before any rollout: everything on stable, no stamp.
  writeFileSync(include, `split_clients "${target.key}" $${target.variable} {\n    *  stable;\n}\n`);
  writeFileSync(
    conf,
    `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  upstream stable { server 127.0.0.1:${stable.port}; keepalive 16; }
  upstream canary { server 127.0.0.1:${canary.port}; keepalive 16; }
  include ${include};
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass http://$${target.variable};
    }
  }
}
`,
  );
  const nginx = spawn(target.nginx, ['-p', dir, '-c', conf, '-e', join(dir, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'] });
  const log = collect(nginx);
  const stop = async () => {
    if (nginx.exitCode === null) nginx.kill('SIGQUIT');
    await exited(nginx);
    await Promise.all([stable, canary].map((v) => new Promise((r) => v.server.close(r))));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(
      'nginx (split)',
      15_000,
      () => listening(port),
      nginx,
      () => `${log()}\n${existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8') : ''}`,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  const url = `http://127.0.0.1:${port}`;
  const ask = async (entity: string): Promise<'stable' | 'canary'> => {
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      try {
        res = await fetch(url, { headers: { 'x-entity': entity } });
      } catch (err) {
        // A reload retires workers, which close their idle keep-alive connections: a client may pick one as it
        // closes. The request is idempotent, and any HTTP client worth the name sends it again.
        if (attempt < 3) continue;
        throw err;
      }
      const body = await res.text();
      if (body !== 'stable' && body !== 'canary') throw new Error(`nginx answered ${res.status}: ${body.slice(0, 200)}`);
      return body;
    }
  };
  const measure = async (entities: number, prefix = 'entity-') => {
    let onCanary = 0;
    for (let i = 0; i < entities; i += 50) {
      const batch = await Promise.all(Array.from({ length: Math.min(50, entities - i) }, (_, j) => ask(`${prefix}${i + j}`)));
      onCanary += batch.filter((v) => v === 'canary').length;
    }
    return Math.round((onCanary / entities) * 10_000) / 100;
  };
  return { url, target, ask, measure, stop };
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

/** Debian's nginx, or one on PATH; as root outside the tests' namespace, installed when missing. */
export function nginxBinary(): string {
  for (const p of ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx']) if (existsSync(p)) return p;
  const which = spawnSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim()) return which.stdout.trim();
  // Not from inside the tests' loopback-only namespace: the mirror is unreachable there (the test harness installs it first).
  if (process.getuid?.() === 0 && !process.env.ROLLOUT_IN_NETNS) {
    process.stderr.write("[cluster] nginx not found: installing Debian's nginx package\n");
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const update = spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    const install =
      update.status === 0 ? spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'nginx'], { stdio: 'inherit', env }) : update;
    if (install.status === 0 && existsSync('/usr/sbin/nginx')) return '/usr/sbin/nginx';
  }
  throw new Error('nginx not found: apt-get install nginx (Debian), or put nginx on PATH');
}
