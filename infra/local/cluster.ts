/**
 * A local cluster: one throwaway PostgreSQL, N `rollout serve` nodes and nginx
 * in front (the configuration in nginx.conf.template), all on loopback.
 *
 *   npm run cluster:3node            start, print the URLs, run until Ctrl-C
 *
 * The end-to-end test starts the same thing through `startCluster`.
 * nginx is Debian's package; it is installed if missing (as root).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { READ_DEADLINE_MS } from '../../shared/runtimes/node/node-api.js';
import { nodeConfigSchema } from '../../shared/runtimes/node/node.js';
import { connect } from 'node:net';
import { send } from '../../shared/adapters/http/client.js';
import { collect, exited, freePort, startPostgres, waitFor } from './processes.js';
import { nginxBinary } from '../../test/support/split-nginx.js';

export { nginxBinary };

const root = resolve(import.meta.dirname, '../..');

export interface ClusterOptions {
  nodes?: number;
  /** nginx's port (default: a free one; the interactive script uses 8000). */
  port?: number;
  /** Environment for every node: CLUSTER_LEASE_TTL, CLUSTER_HEARTBEAT_INTERVAL… */
  env?: Record<string, string>;
  /** A PostgreSQL to use instead of a throwaway one. */
  databaseUrl?: string;
  /** nginx serves HTTPS with this certificate; `ca` is what it chains to (for the health checks here). */
  tls?: ProxyTls & { readonly ca: Buffer };
}

export interface ClusterNodeProcess {
  readonly id: string;
  readonly url: string;
  process: ChildProcess;
  log: () => string;
  /** Signal it and wait for it to exit. */
  kill(signal: NodeJS.Signals): Promise<void>;
  /** Start it again (after a kill), same id and port. */
  restart(): Promise<void>;
}

export interface LocalCluster {
  /** nginx. */
  readonly url: string;
  readonly databaseUrl: string;
  readonly nodes: ClusterNodeProcess[];
  stop(): Promise<void>;
}

/** How long nginx waits for a node's answer before moving on (see the template's header). */
export interface ProxyTimeouts {
  readMs: number;
  writeMs: number;
}

/**
 * The proxy's timeouts from the nodes' own settings (the CLUSTER_* variables
 * `rollout serve` reads, defaults and validation from the node's schema).
 */
export function proxyTimeouts(env: Record<string, string | undefined> = {}): ProxyTimeouts {
  const num = (name: string, key: string) => (env[name] === undefined ? {} : { [key]: Number(env[name]) });
  const c = nodeConfigSchema.parse({
    nodeId: 'proxy',
    store: { kind: 'pglite', dataDir: null },
    ...num('CLUSTER_LEASE_TTL', 'leaseTtlSeconds'),
    ...num('CLUSTER_HEARTBEAT_INTERVAL', 'heartbeatIntervalSeconds'),
    ...num('CLUSTER_ELECTION_INTERVAL', 'electionIntervalSeconds'),
  });
  return {
    // A live node answers within its read deadline; the rest is scheduling slack.
    readMs: READ_DEADLINE_MS + 500,
    // A silent leader's lease runs out within a TTL of its last renewal; a contender takes it
    // within one election interval after that, plus the skew margin (at most 1 s).
    writeMs: Math.ceil((c.leaseTtlSeconds + c.electionIntervalSeconds + 1) * 1000),
  };
}

/** nginx's certificate and key (PEM files): it then serves HTTPS. */
export interface ProxyTls {
  readonly certFile: string;
  readonly keyFile: string;
}

export function nginxConfig(dir: string, port: number, nodePorts: readonly number[], timeouts: ProxyTimeouts = proxyTimeouts(), tls?: ProxyTls): string {
  const template = readFileSync(join(root, 'infra/local/nginx.conf.template'), 'utf8');
  return template
    .replaceAll('{{dir}}', dir)
    .replaceAll('{{port}}', String(port))
    .replace('{{listen_ssl}}', tls ? ' ssl' : '')
    .replace(
      '{{tls}}',
      tls
        ? `    ssl_certificate ${tls.certFile};\n    ssl_certificate_key ${tls.keyFile};\n    ssl_protocols TLSv1.2 TLSv1.3;`
        : '    # no TLS: plain HTTP on loopback',
    )
    .replaceAll('{{read_timeout}}', `${timeouts.readMs}ms`)
    .replaceAll('{{write_timeout}}', `${timeouts.writeMs}ms`)
    .replace(
      '{{read_servers}}',
      // Each node twice among the backups: with every primary benched, a read still has two tries on each node
      // (two read timeouts' worth per node) before it gets 502, enough for a host that stalled to come back.
      [
        ...nodePorts.map((p) => `    server 127.0.0.1:${p} max_fails=1 fail_timeout=5s;`),
        ...[0, 1].flatMap(() => nodePorts.map((p) => `    server 127.0.0.1:${p} backup max_fails=0;`)),
      ].join('\n'),
    )
    .replace('{{write_servers}}', nodePorts.map((p) => `    server 127.0.0.1:${p} max_fails=0;`).join('\n'));
}

/** nginx with the shipped configuration in front of `nodePorts`; `url` once it answers. */
export async function startNginx(
  nodePorts: readonly number[],
  o: { port?: number; timeouts?: ProxyTimeouts; tls?: ProxyTls; rewrite?: (conf: string) => string } = {},
): Promise<{ url: string; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'rollout-nginx-'));
  for (const sub of ['tmp/body', 'tmp/proxy', 'tmp/fastcgi', 'tmp/uwsgi', 'tmp/scgi']) mkdirSync(join(dir, sub), { recursive: true });
  chmodSync(dir, 0o755);
  const port = o.port ?? (await freePort());
  const conf = nginxConfig(dir, port, nodePorts, o.timeouts, o.tls);
  writeFileSync(join(dir, 'nginx.conf'), o.rewrite ? o.rewrite(conf) : conf);
  const nginx = spawn(nginxBinary(), ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'] });
  const nginxLog = collect(nginx);
  const stop = async () => {
    if (nginx.exitCode === null) nginx.kill('SIGQUIT');
    await exited(nginx);
    rmSync(dir, { recursive: true, force: true });
  };
  const url = `${o.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  try {
    await waitFor(
      'nginx',
      15_000,
      () => listening(port),
      nginx,
      () => `${nginxLog()}\n${existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8') : ''}`,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, stop };
}

/** Whether something accepts connections on the port (nginx is up, HTTP or HTTPS alike). */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

async function healthy(url: string, ca?: Buffer): Promise<boolean> {
  const res = await send(new URL('/cluster/health', url), { method: 'GET', headers: {}, timeoutMs: 1_000, ...(ca ? { tls: { ca } } : {}) });
  return res.status === 200;
}

export async function startCluster(o: ClusterOptions = {}): Promise<LocalCluster> {
  const count = o.nodes ?? 3;
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const s of stops.reverse()) await s().catch(() => undefined);
  };
  try {
    let databaseUrl = o.databaseUrl;
    if (!databaseUrl) {
      const pg = await startPostgres();
      stops.push(pg.stop);
      databaseUrl = pg.url;
    }
    const nodes: ClusterNodeProcess[] = [];
    for (let i = 1; i <= count; i++) {
      const port = await freePort();
      const id = `node-${i}`;
      const url = `http://127.0.0.1:${port}`;
      // nginx, on loopback, says whom it forwards for: the nodes' per-address limit is the client's.
      const env = {
        ...process.env,
        ROLLOUT_TRUSTED_PROXIES: '127.0.0.1',
        ...o.env,
        CLUSTER_NODE_ID: id,
        CLUSTER_HOSTNAME: id,
        ROLLOUT_PORT: String(port),
        ROLLOUT_API_URL: url,
        DATABASE_URL: databaseUrl,
      };
      const launch = () =>
        spawn(process.execPath, ['--import', 'tsx', join(root, 'shared/runtimes/cli/cli.ts'), 'serve', '--json'], {
          cwd: root,
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
      const node: ClusterNodeProcess = {
        id,
        url,
        process: launch(),
        log: () => '',
        async kill(signal) {
          if (node.process.exitCode === null && node.process.signalCode === null) node.process.kill(signal);
          await exited(node.process);
        },
        async restart() {
          node.process = launch();
          node.log = collect(node.process);
          await waitFor(
            id,
            30_000,
            () => healthy(url),
            node.process,
            () => node.log(),
          );
        },
      };
      node.log = collect(node.process);
      nodes.push(node);
      stops.push(() => node.kill('SIGTERM'));
    }
    for (const n of nodes)
      await waitFor(
        n.id,
        30_000,
        () => healthy(n.url),
        n.process,
        () => n.log(),
      );

    const nginx = await startNginx(
      nodes.map((n) => Number(new URL(n.url).port)),
      { ...(o.port ? { port: o.port } : {}), ...(o.tls ? { tls: o.tls } : {}), timeouts: proxyTimeouts({ ...process.env, ...o.env }) },
    );
    stops.push(() => nginx.stop());
    const url = nginx.url;
    await waitFor('nginx', 15_000, () => healthy(url, o.tls?.ca));
    // Stop in reverse: nginx, then the nodes (each resigns), then PostgreSQL.
    return { url, databaseUrl, nodes, stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const port = Number(process.env.ROLLOUT_PORT ?? 8000);
  process.stdout.write('starting PostgreSQL, 3 nodes and nginx…\n');
  const cluster = await startCluster({ port });
  process.stdout.write(
    [
      `cluster up: nginx on ${cluster.url} (status page: ${cluster.url}/)`,
      ...cluster.nodes.map((n) => `  ${n.id}  ${n.url}  (pid ${n.process.pid})`),
      `  PostgreSQL ${cluster.databaseUrl}`,
      'try:',
      `  npm run rollout -- cluster status --url ${cluster.url}`,
      `  kill -9 <pid of the leader>   # a follower takes over within the lease TTL`,
      'Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
  await new Promise<void>((done) => {
    process.once('SIGINT', () => done());
    process.once('SIGTERM', () => done());
  });
  process.stdout.write('stopping…\n');
  await cluster.stop();
  process.exit(0);
}
