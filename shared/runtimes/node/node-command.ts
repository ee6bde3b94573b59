import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Logger } from '../../log.js';
import { UsageError } from '../cli/errors.js';
import { serveApi, type TlsFiles } from './http.js';
import { authEnabled, type NodeConfig } from './config.js';
import { nodeMetrics } from './metrics.js';
import { nodeApi } from './node-api.js';
import { ControlPlaneNode, type NodeConfigInput } from './node.js';
import { LocalWorkerPool } from './worker-pool.js';

/**
 * `rollout start` (npm start) and `rollout serve`: a node with its HTTP
 * server, until a signal stops it. The first SIGINT/SIGTERM stops cleanly
 * (leadership resigned, the node leaves the cluster); a second exits at once.
 * What `npm start` adds (the demo, in demo/: not shipped) comes in as a
 * StartExtension.
 */

async function listen(node: ControlPlaneNode, logger: Logger) {
  const c = node.config;
  const handle = nodeApi(node, nodeMetrics(node));
  if (c.auth.insecureNoAuth && !authEnabled(c)) {
    logger.warn(
      `INSECURE: serving ${c.host}:${c.port} with no authentication (--insecure-no-auth): anyone who reaches this node may create, promote and abort rollouts and runs`,
    );
  }
  try {
    return await serveApi(handle, { host: c.host, port: c.port, logger, ...(c.tls ? { tls: readTls(c.tls) } : {}) });
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'EADDRINUSE') throw new UsageError(`port ${node.config.port} on ${node.config.host} is in use: stop what uses it or pass --port`);
    throw err;
  }
}

/** The node's TLS files, read now: a missing one stops the start, naming it. */
export function readTls(t: NonNullable<NodeConfig['tls']>): TlsFiles {
  const read = (what: string, file: string) => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new UsageError(`${what} ${file} cannot be read: ${(err as { code?: string }).code ?? String(err)}`);
    }
  };
  return {
    cert: read('--tls-cert', t.certFile),
    key: read('--tls-key', t.keyFile),
    ...(t.clientCaFile ? { clientCa: read('--tls-client-ca', t.clientCaFile) } : {}),
  };
}

/** Resolves on the first SIGINT/SIGTERM (or when `signal` aborts). */
function untilStopped(signal?: AbortSignal): Promise<string> {
  return new Promise((done) => {
    let count = 0;
    const on = (sig: NodeJS.Signals) => {
      if (++count > 1) process.exit(130);
      done(sig);
    };
    process.on('SIGINT', on).on('SIGTERM', on);
    signal?.addEventListener('abort', () => done('abort'), { once: true });
  });
}

/** One `npm start` per data directory: PGlite is a single process's database. */
function lockDataDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true });
  const lock = resolve(dir, 'rollout.pid');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lock, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(lock, { force: true });
    } catch (err) {
      if ((err as { code?: string }).code !== 'EEXIST') throw err;
      const pid = Number(readFileSync(lock, 'utf8'));
      let alive = false;
      try {
        process.kill(pid, 0);
        alive = Number.isInteger(pid) && pid > 0;
      } catch {
        alive = false;
      }
      if (alive) throw new UsageError(`${dir} is in use by another control plane (pid ${pid}); stop it or pass --data-dir`);
      rmSync(lock, { force: true }); // left by a process that died
    }
  }
  throw new UsageError(`cannot lock ${dir}`);
}

export interface StartOptions {
  dataDir: string | null;
  host: string;
  port: number;
  nodeId: string;
  workers: number;
  itemMs: number;
  /** Who may ask, and what a spec may make the node request (`--auth-*`, `--oidc-*`, `--tls-*`, `--outbound-config`…). */
  trust?: Pick<NodeConfigInput, 'outbound' | 'targets' | 'auth' | 'tls' | 'allowedHosts' | 'rateLimit' | 'trustedProxies'>;
}

/**
 * What a companion adds to a start (`npm start`'s demo, tools/demo/start.ts): each
 * hook optional, none called once a stop was asked for. The status page's
 * per-rollout fields are the node's (`node.statusFields`), added by the
 * companion itself.
 */
export interface StartExtension {
  /** Before the node opens: targets it must know from the start, given those the operator declared. */
  targetsBeforeStart?(declared: NodeConfigInput['targets']): Promise<StartTargets>;
  /** Once the node serves and its workers run: what it starts runs until the stop; null: nothing (the start prints its own status line). */
  afterStart?(ctx: StartContext): Promise<StartedExtension | null>;
}

export interface StartTargets {
  readonly targets: NonNullable<NodeConfigInput['targets']>;
  /** Last, after the node stopped (also when the start failed). */
  stop(): Promise<void>;
}

export interface StartContext {
  readonly node: ControlPlaneNode;
  readonly pool: LocalWorkerPool;
  /** The node's URL, as it serves. */
  readonly url: string;
  readonly workers: number;
  readonly logger: Logger;
  readonly out: NodeJS.WriteStream;
  /** Stops the start as a signal would (the demo's --exit-after-demo). */
  readonly stop: () => void;
}

export interface StartedExtension {
  /** Stopped first, once the stop is asked for (a progress printer). */
  readonly printer?: { stop(): void };
  /** Then this, before the workers and the node stop. */
  stop(): Promise<void>;
}

/** `npm start`: one node on embedded PGlite, in-process workers, and what `extension` adds (npm start's demo, live progress). */
export async function startCommand(o: StartOptions, logger: Logger, out: NodeJS.WriteStream = process.stdout, extension: StartExtension = {}): Promise<void> {
  const unlock = o.dataDir ? lockDataDir(o.dataDir) : () => undefined;
  const stopped = new AbortController();
  // Listening from the start: a Ctrl-C while the database opens still stops cleanly (once it is open).
  const stopSignal = untilStopped(stopped.signal);
  let signalled = false;
  void stopSignal.then(() => (signalled = true));
  let node: ControlPlaneNode | null = null;
  let added: StartTargets | null = null;
  try {
    if (extension.targetsBeforeStart && !signalled) added = await extension.targetsBeforeStart(o.trust?.targets);
    const targets = added && Object.keys(added.targets).length ? { targets: { ...o.trust?.targets, ...added.targets } } : {};
    node = await ControlPlaneNode.open(
      {
        nodeId: o.nodeId,
        host: o.host,
        port: o.port,
        store: { kind: 'pglite', dataDir: o.dataDir },
        elector: 'static',
        scanIntervalSeconds: 1,
        ...o.trust,
        ...targets,
      },
      logger,
    );
    const server = await listen(node, logger);
    await node.start();
    const pool = new LocalWorkerPool(node, { size: o.workers, itemMs: o.itemMs, logger });
    pool.start();
    out.write(`Rollout control plane: node ${o.nodeId} on ${server.url} (store: ${o.dataDir ? `PGlite in ${o.dataDir}` : 'PGlite in memory'})\n`);
    // Said where it is seen: a run of yours created here is completed by them, with results they make up.
    const mocks =
      o.workers > 0
        ? `${o.workers} in-process mock workers per open run complete every item with a made-up result after ${o.itemMs} ms (--workers 0 runs none)`
        : 'no in-process workers: runs wait for workers of yours';
    if (o.workers > 0) node.statusNotes.add(mocks);
    out.write(`${mocks}\n`);
    const started =
      extension.afterStart && !signalled
        ? await extension.afterStart({ node, pool, url: server.url, workers: o.workers, logger, out, stop: () => stopped.abort() })
        : null;
    if (!started) out.write(`status page ${server.url} — Ctrl-C to stop\n`);
    const why = await stopSignal;
    started?.printer?.stop();
    out.write(`${why === 'abort' ? 'stopping' : `${why}: stopping`}…\n`);
    await started?.stop();
    await pool.close();
    await server.close();
    await node.stop();
    node = null;
    out.write('stopped\n');
  } finally {
    await node?.stop().catch(() => undefined);
    await added?.stop().catch(() => undefined);
    unlock();
  }
}

/** `rollout serve`: a cluster node on PostgreSQL. */
export async function serveCommand(config: NodeConfigInput, logger: Logger, out: NodeJS.WriteStream = process.stdout): Promise<void> {
  // Listening before the store opens: a SIGTERM during start-up still leaves the cluster cleanly.
  const stopSignal = untilStopped();
  const node = await ControlPlaneNode.open(config, logger);
  let server: Awaited<ReturnType<typeof listen>> | null = null;
  try {
    server = await listen(node, logger);
    await node.start();
    out.write(`${JSON.stringify({ event: 'serving', nodeId: node.nodeId, url: server.url, apiUrl: node.apiUrl, elector: node.config.elector })}\n`);
    const why = await stopSignal;
    logger.info(`${why}: stopping`, { nodeId: node.nodeId });
  } finally {
    // Resign first, so a follower takes over while this node finishes; then stop serving.
    await node.stop();
    await server?.close();
  }
}
