/**
 * The two targets of the actuation bench, each as a pair: one the engine
 * moves through its actuator ("ours"), one moved by hand with the target's
 * own operation alone ("raw"), and an observer that sees when a share is
 * live on either, independent of whoever wrote it.
 *
 * The observer runs in a worker thread of its own (this module is also its
 * entry): probing back to back on the engine's event loop would queue the
 * actuator's many small awaits behind the probes' callbacks and charge ours
 * for the observer's load, which a controller in production does not carry.
 */
import { execFile } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { setImmediate as yieldNow } from 'node:timers/promises';
import { promisify } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { GetAliasCommand, UpdateAliasCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { startSplitNginx, type SplitNginx } from '../support/split-nginx.js';
import { NginxActuator } from '../../shared/adapters/actuators/nginx/actuator.js';
import type { Actuator } from '../../shared/actuation/port.js';
import { lambdaClient, setupLambdaAlias, type LambdaAliasUnderTest } from '../support/actuators/lambda-alias.js';

const run = promisify(execFile);

/** Longer than any transition here takes: a share that never shows is a broken bench, not a slow sample. */
const LIVE_DEADLINE_MS = 15_000;

/** Milliseconds on the monotonic clock every thread of the process shares (performance.now() is per thread). */
export const clock = () => Number(process.hrtime.bigint()) / 1e6;

export interface Watch {
  /** When the target first showed the share asked for, on `clock`. */
  readonly live: Promise<number>;
}

export interface BenchTarget {
  readonly kind: 'nginx' | 'lambda_alias';
  /** The name rollouts list in `actuators`, and the actuator the engine moves it with. */
  readonly name: string;
  readonly actuator: Actuator;
  readonly newVersion: string;
  readonly stableVersion: string;
  /** Checks our target shows `from`, then has the observer watch until it shows `to` (already watching when this resolves). */
  watch(from: number, to: number): Promise<Watch>;
  /**
   * The raw twin moved from `from` to `to` by the target's own operation:
   * how long the operation took, and how long until the observer saw it.
   */
  raw(from: number, to: number): Promise<{ op: number; live: number }>;
  close(): Promise<void>;
}

// --------------------------------------------------------------- observer

type Look =
  | { readonly kind: 'nginx'; readonly port: number; readonly entity: string; readonly want: string }
  | {
      readonly kind: 'alias';
      readonly motoUrl: string;
      readonly functionName: string;
      readonly alias: string;
      readonly newVersion: string;
      readonly want: number;
    };
type Ask = { readonly op: 'look'; readonly look: Look } | { readonly op: 'nginx' } | { readonly op: 'stop' };
type Told = { readonly id: number } & (
  | { readonly started: true }
  | { readonly at: number; readonly retried: number }
  | { readonly nginx: Pick<SplitNginx, 'url' | 'target'> }
  | { readonly stopped: true }
  | { readonly error: string }
);

/** One request on a connection of its own: a new client's view, never a keep-alive connection an old worker still holds. */
function ask(port: number, entity: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent: false, headers: { 'x-entity': entity } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** The alias's share on the new version as moto holds it (what GetAlias shows), 0–100. */
async function aliasShare(client: LambdaClient, functionName: string, alias: string, newVersion: string): Promise<number> {
  const a = await client.send(new GetAliasCommand({ FunctionName: functionName, Name: alias }));
  const weights = a.RoutingConfig?.AdditionalVersionWeights ?? {};
  const share = a.FunctionVersion === newVersion ? 1 : (weights[newVersion] ?? 0);
  return Math.round(share * 10_000) / 100;
}

/** The worker's side: looks back to back until the target shows what is wanted; holds the nginx instances. */
function observe(): void {
  const clients = new Map<string, LambdaClient>();
  const nginxes: SplitNginx[] = [];
  const port = parentPort!;
  const until = async (look: Look, tell: (t: Told) => void, id: number) => {
    const deadline = clock() + LIVE_DEADLINE_MS;
    let retried = 0;
    tell({ id, started: true });
    for (;;) {
      if (look.kind === 'nginx') {
        // A connection refused or reset mid-reload is asked again, and counted.
        const body = await ask(look.port, look.entity).catch(() => (retried++, ''));
        if (body === look.want) return tell({ id, at: clock(), retried });
        if (body !== '' && body !== 'stable' && body !== 'canary') throw new Error(`nginx answered ${body.slice(0, 200)}`);
        await yieldNow();
      } else {
        // On moto itself, not through the RevisionId proxy, which would queue the look behind the writer's requests.
        let client = clients.get(look.motoUrl);
        if (!client) clients.set(look.motoUrl, (client = lambdaClient(look.motoUrl)));
        if ((await aliasShare(client, look.functionName, look.alias, look.newVersion)) === look.want) return tell({ id, at: clock(), retried });
      }
      if (clock() > deadline)
        throw new Error(
          `${look.kind === 'nginx' ? `nginx: ${look.entity}` : `alias ${look.functionName}:${look.alias}`} never showed ${look.want} within ${LIVE_DEADLINE_MS} ms`,
        );
    }
  };
  const handle = async (id: number, ask: Ask, tell: (t: Told) => void) => {
    if (ask.op === 'look') return until(ask.look, tell, id);
    if (ask.op === 'nginx') {
      const n = await startSplitNginx();
      nginxes.push(n);
      return tell({ id, nginx: { url: n.url, target: n.target } });
    }
    await Promise.all(nginxes.splice(0).map((n) => n.stop()));
    for (const c of clients.values()) c.destroy();
    tell({ id, stopped: true });
  };
  port.on('message', ({ id, ask }: { id: number; ask: Ask }) => {
    const tell = (t: Told) => port.postMessage(t);
    handle(id, ask, tell).catch((err: unknown) => tell({ id, error: err instanceof Error ? err.message : String(err) }));
  });
}

/**
 * The observer, in a worker thread. It also runs the nginx instances with
 * their two upstream versions: on the engine's thread, every probe's
 * upstream request would be served between the actuator's awaits.
 */
export class Observer {
  /** Probe requests asked again after a connection error (nginx mid-reload). */
  retried = 0;
  // A worker thread does not inherit the TypeScript loader: it registers it, then loads this module as its entry.
  private readonly worker = new Worker(
    `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((tsx) => { tsx.register(); return import(${JSON.stringify(import.meta.url)}); })`,
    { eval: true, workerData: { observer: true } },
  );
  private readonly waiting = new Map<number, { started?: () => void; done: (t: Told) => void; failed: (err: Error) => void }>();
  private seq = 0;
  private dead: Error | null = null;

  constructor() {
    this.worker.on('message', (t: Told) => {
      const w = this.waiting.get(t.id);
      if (!w) return;
      if ('started' in t) return w.started?.();
      this.waiting.delete(t.id);
      if ('error' in t) return w.failed(new Error(t.error));
      if ('retried' in t) this.retried += t.retried;
      w.done(t);
    });
    this.worker.on('error', (err) => {
      this.dead = err;
      for (const w of this.waiting.values()) w.failed(err);
      this.waiting.clear();
    });
  }

  private call(ask: Ask, started?: () => void): Promise<Told> {
    if (this.dead) return Promise.reject(this.dead);
    const id = ++this.seq;
    const answer = new Promise<Told>((done, failed) => this.waiting.set(id, { ...(started ? { started } : {}), done, failed }));
    this.worker.postMessage({ id, ask });
    return answer;
  }

  /** Resolves once the observer is looking; `live` when it has seen it. */
  async watch(look: Look): Promise<Watch> {
    let started!: () => void;
    const looking = new Promise<void>((r) => (started = r));
    const live = this.call({ op: 'look', look }, started).then((t) => (t as { at: number }).at);
    // Rejected before anyone awaits it (the worker died): kept from being reported as unhandled; the await sees it.
    live.catch(() => undefined);
    await Promise.race([looking, live]);
    return { live };
  }

  /** A split nginx (test/support/split-nginx.ts) run by the observer's thread: its URL and target. */
  async nginx(): Promise<Pick<SplitNginx, 'url' | 'target'>> {
    return ((await this.call({ op: 'nginx' })) as { nginx: Pick<SplitNginx, 'url' | 'target'> }).nginx;
  }

  async close(): Promise<void> {
    if (!this.dead) await this.call({ op: 'stop' });
    await this.worker.terminate();
  }
}

if (!isMainThread && (workerData as { observer?: boolean } | null)?.observer) observe();

// ------------------------------------------------------------------ nginx

/**
 * nginx's split_clients hash: MurmurHash2 of the key (ngx_murmur_hash2),
 * so a probe key that changes sides at a given stage can be chosen ahead.
 */
export function ngxMurmurHash2(data: Uint8Array): number {
  const m = 0x5bd1e995;
  let len = data.length;
  let h = len | 0;
  let i = 0;
  while (len >= 4) {
    let k = data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
    i += 4;
    len -= 4;
  }
  if (len === 3) h ^= data[i + 2]! << 16;
  if (len >= 2) h ^= data[i + 1]! << 8;
  if (len >= 1) h = Math.imul(h ^ data[i]!, m);
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h >>> 0;
}

/** Where split_clients puts the canary's upper bound for `percent` (a hash below it is on canary). */
const bound = (percent: number) => Number((BigInt(Math.round(percent * 100)) * 0xffffffffn) / 10_000n);
const utf8 = new TextEncoder();
/** Clear of both bounds, so an off-by-one in how nginx rounds them cannot pick a key on the wrong side. */
const MARGIN = 2 ** 22;

let probeSeq = 0;
/** A fresh entity whose key (entity, then the client address, as the include's key reads it) flips between the two percents. */
function probeEntity(from: number, to: number): string {
  const [lo, hi] = [bound(Math.min(from, to)) + MARGIN, bound(Math.max(from, to)) - MARGIN];
  for (;;) {
    const entity = `probe-${++probeSeq}`;
    const h = ngxMurmurHash2(utf8.encode(`${entity}127.0.0.1`));
    if (h >= lo && h < hi) return entity;
  }
}

/**
 * Until the master has a single worker: after a reload the old one still
 * accepts new connections for a moment, and would answer a probe with the
 * split before last.
 */
async function settled(n: Nginx): Promise<void> {
  const master = (await readFile(join(n.target.prefix!, 'nginx.pid'), 'utf8')).trim();
  const deadline = clock() + LIVE_DEADLINE_MS;
  for (;;) {
    let workers = 0;
    for (const pid of (await readdir('/proc')).filter((e) => /^\d+$/.test(e))) {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
      if (stat.includes('(nginx)') && stat.replace(/^.*\) /, '').split(' ')[1] === master) workers++;
    }
    if (workers === 1) return;
    if (clock() > deadline) throw new Error(`nginx ${n.url}: ${workers} workers ${LIVE_DEADLINE_MS} ms after a reload`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

type Nginx = Pick<SplitNginx, 'url' | 'target'>;

const side = (from: number, to: number) => ({ before: to > from ? 'stable' : 'canary', after: to > from ? 'canary' : 'stable' });

export async function nginxTargets(observer: Observer): Promise<BenchTarget> {
  const [ours, raw] = [await observer.nginx(), await observer.nginx()];
  const portOf = (n: Nginx) => Number(new URL(n.url).port);
  const actuator = new NginxActuator('web', ours.target);
  const rawRenderer = new NginxActuator('raw', raw.target);
  /** A fresh probe key for the move, checked on the side it leaves; then watched until it answers the other side. */
  const watch = async (n: Nginx, from: number, to: number) => {
    const entity = probeEntity(from, to);
    const { before, after } = side(from, to);
    await settled(n);
    const got = await ask(portOf(n), entity);
    if (got !== before)
      throw new Error(`nginx: probe ${entity} answered ${got} before the transition, expected ${before}: the key was chosen for another split`);
    return observer.watch({ kind: 'nginx', port: portOf(n), entity, want: after });
  };
  const nginx = (...a: string[]) => run(raw.target.nginx, ['-p', raw.target.prefix!, '-c', raw.target.config, '-e', raw.target.errorLog!, ...a]);
  return {
    kind: 'nginx',
    name: 'web',
    actuator,
    newVersion: 'v2',
    stableVersion: 'v1',
    watch: (from, to) => watch(ours, from, to),
    async raw(from, to) {
      const { live } = await watch(raw, from, to);
      const t0 = clock();
      // What an operator's script does: the file, nginx -t, reload; nothing read back, no wait for old workers.
      await writeFile(raw.target.include, rawRenderer.render({ percent: to, final: false }, null));
      await nginx('-t');
      await nginx('-s', 'reload');
      const op = clock() - t0;
      return { op, live: (await live) - t0 };
    },
    // The observer stops its nginx instances when it closes.
    close: () => Promise.resolve(),
  };
}

// ------------------------------------------------------------- Lambda alias

export async function lambdaTargets(motoUrl: string, observer: Observer): Promise<BenchTarget> {
  // Three aliases: ours; one moved by UpdateAlias with nothing else asking moto (the round trip alone); one moved the same
  // way while watched as ours is (the observer's own load on moto is in both "live" figures, and in neither round trip alone).
  const [ours, alone, watched] = await Promise.all([setupLambdaAlias(motoUrl), setupLambdaAlias(motoUrl), setupLambdaAlias(motoUrl)]);
  const checker = lambdaClient(motoUrl);
  const watch = async (fn: LambdaAliasUnderTest, from: number, to: number) => {
    const share = await aliasShare(checker, fn.functionName, fn.alias, fn.newVersion);
    if (share !== from) throw new Error(`alias ${fn.functionName}:${fn.alias} shows ${share}% before the transition, expected ${from}%`);
    return observer.watch({ kind: 'alias', motoUrl, functionName: fn.functionName, alias: fn.alias, newVersion: fn.newVersion, want: to });
  };
  /** One conditioned UpdateAlias, as the actuator sends it, on the RevisionId read just before. */
  const update = async (fn: LambdaAliasUnderTest, to: number, revision: string | undefined) => {
    const t0 = clock();
    await fn.viaProxy.send(
      new UpdateAliasCommand({
        FunctionName: fn.functionName,
        Name: fn.alias,
        FunctionVersion: fn.stableVersion,
        RoutingConfig: { AdditionalVersionWeights: to > 0 ? { [fn.newVersion]: Math.round(to * 100) / 10_000 } : {} },
        RevisionId: revision,
      }),
    );
    return { t0, op: clock() - t0 };
  };
  const revisionOf = async (fn: LambdaAliasUnderTest) =>
    (await fn.viaProxy.send(new GetAliasCommand({ FunctionName: fn.functionName, Name: fn.alias }))).RevisionId;
  return {
    kind: 'lambda_alias',
    name: ours.functionName,
    actuator: ours.actuator,
    newVersion: ours.newVersion,
    stableVersion: ours.stableVersion,
    watch: (from, to) => watch(ours, from, to),
    async raw(from, to) {
      const { op } = await update(alone, to, await revisionOf(alone));
      const revision = await revisionOf(watched);
      const { live } = await watch(watched, from, to);
      const { t0 } = await update(watched, to, revision);
      return { op, live: (await live) - t0 };
    },
    async close() {
      checker.destroy();
      await Promise.all([ours.close(), alone.close(), watched.close()]);
    },
  };
}
