import { randomUUID } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyTimeouts, startCluster, startNginx, type ClusterNodeProcess, type LocalCluster } from '../../infra/local/cluster.js';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { nodeMetrics } from '../../shared/runtimes/node/metrics.js';
import { nodeApi } from '../../shared/runtimes/node/node-api.js';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { freePort } from '../../infra/local/processes.js';
import { freshDatabase } from '../support/backends.js';
import { eventually as until } from '../support/gate.js';

/**
 * The local cluster end to end: its own PostgreSQL, `rollout serve`
 * processes and nginx with the shipped configuration. Each test asserts what
 * happened (who took over, at which epoch, after what; which node answered;
 * how many times a write was applied); the timings are printed, not asserted
 * (figures belong in `npm run bench -- handover`).
 */
const TTL = 4;
const ELECTION_INTERVAL = 1;
const env = {
  CLUSTER_LEASE_TTL: String(TTL),
  CLUSTER_HEARTBEAT_INTERVAL: '1.5',
  CLUSTER_ELECTION_INTERVAL: String(ELECTION_INTERVAL),
  CLUSTER_ELECTION_TIMEOUT: '4',
  CLUSTER_MONITOR_INTERVAL: '1',
  ROLLOUT_TICK_INTERVAL: '1',
};

type Outcome = { key: string; ok: boolean; status: number; id?: string; error?: string; attempts: number; at: number };
type Answer = { status: number; body: Record<string, unknown>; headers: Headers };

/** A client timeout far above any nginx timeout: a read that hits it was stalled, not slow. */
const CLIENT_TIMEOUT_MS = 30_000;

async function request(url: string, method: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
  });
  const text = await res.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { error: `non-JSON answer: ${text.slice(0, 200)}` };
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const rolloutSpec = (key: string) => ({ target: { service: 'e2e', version: 'v2', labels: { key } }, preset: 'linear', stepPercent: 50, bakeSeconds: 60 });

/** A client as the CLI behaves: one Idempotency-Key per write, kept across its retries. */
async function createRollout(base: string, key: string): Promise<Outcome> {
  let last: Outcome = { key, ok: false, status: 0, error: 'not sent', attempts: 0, at: Date.now() };
  for (let attempt = 1; attempt <= 8; attempt++) {
    try {
      const r = await request(`${base}/rollouts`, 'POST', { spec: rolloutSpec(key) }, { 'idempotency-key': key, 'x-rollout-actor': 'e2e' });
      last = {
        key,
        ok: r.status === 201 || r.status === 200,
        status: r.status,
        attempts: attempt,
        at: Date.now(),
        ...(typeof r.body.id === 'string' ? { id: r.body.id } : {}),
        ...(typeof r.body.error === 'string' ? { error: r.body.error } : {}),
      };
      if (r.status < 500) return last;
    } catch (err) {
      last = { key, ok: false, status: 0, error: err instanceof Error ? err.message : String(err), attempts: attempt, at: Date.now() };
    }
    await sleep(500);
  }
  return last;
}

const alive = (n: ClusterNodeProcess) => n.process.exitCode === null && n.process.signalCode === null;

/** One read through nginx, as seen by the client: who answered, through which upstreams, how long it took. */
type Read = { path: string; status: number; node: string | null; upstream: string; startedAt: number; ms: number; error?: string };

/** Reads of `paths` through nginx, one loop per path, until `stop()`. */
function readers(base: string, paths: readonly string[]) {
  const reads: Read[] = [];
  let reading = true;
  /** One read, recorded with the others. */
  const once = async (path: string): Promise<Read> => {
    const startedAt = Date.now();
    let read: Read;
    try {
      const r = await request(`${base}${path}`, 'GET');
      read = {
        path,
        status: r.status,
        node: r.headers.get('x-rollout-node-id'),
        upstream: r.headers.get('x-controller-upstream') ?? '',
        startedAt,
        ms: Date.now() - startedAt,
        ...(r.status >= 300 ? { error: String(r.body.error) } : {}),
      };
    } catch (err) {
      read = { path, status: 0, node: null, upstream: '', startedAt, ms: Date.now() - startedAt, error: err instanceof Error ? err.message : String(err) };
    }
    reads.push(read);
    return read;
  };
  const loops = paths.map(async (path) => {
    while (reading) {
      await once(path);
      await sleep(10);
    }
  });
  return {
    reads,
    once,
    async stop() {
      reading = false;
      await Promise.all(loops);
    },
  };
}

/** Every read is an answer: 200, or 503 "no leader elected" from /cluster/leader during an election. Never 502/504, never a stalled client. */
function notAnswers(reads: readonly Read[]): string[] {
  return reads
    .filter((r) => !(r.status === 200 || (r.status === 503 && r.path === '/cluster/leader' && r.error === 'no leader elected')))
    .map((r) => `${r.path}: ${r.status} after ${r.ms} ms from ${r.node ?? '?'} via ${r.upstream || '?'}: ${r.error ?? ''}`);
}

const quantile = (xs: number[], q: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]! : 0);

describe('three nodes behind nginx', () => {
  let cluster: LocalCluster;
  let db: pg.Client;
  const paused = new Set<string>();

  beforeAll(async () => {
    cluster = await startCluster({ env });
    db = new pg.Client({ connectionString: cluster.databaseUrl });
    await db.connect();
  }, 120_000);

  afterAll(async () => {
    for (const n of cluster?.nodes ?? []) if (paused.has(n.id)) n.process.kill('SIGCONT');
    await db?.end();
    await cluster?.stop();
  });

  async function leaderOf(): Promise<string | null> {
    for (const n of cluster.nodes) {
      if (!alive(n) || paused.has(n.id)) continue;
      const r = await request(`${n.url}/cluster/leader`, 'GET').catch(() => null);
      if (r?.status === 200) return String(r.body.leader_id);
    }
    return null;
  }

  async function waitForLeader(not: string | null, timeoutMs: number): Promise<string> {
    return until(`a leader other than ${not}`, timeoutMs, async () => {
      const l = await leaderOf();
      return l && l !== not ? l : null;
    });
  }

  const lease = async () =>
    (
      await db.query<{ holder: string | null; epoch: string; acquired_at: Date; expires_at: Date }>(
        `SELECT holder, epoch, acquired_at, expires_at FROM leases WHERE name = 'promotion_leader'`,
      )
    ).rows[0]!;
  const port = (n: ClusterNodeProcess) => `127.0.0.1:${new URL(n.url).port}`;

  it('survives SIGKILL of the leader: the lease is taken only once it has run out, at the next epoch; every write applied at most once; reads through nginx never get a 502', async () => {
    const first = await waitForLeader(null, 30_000);
    const victim = cluster.nodes.find((n) => n.id === first)!;

    const outcomes: Outcome[] = [];
    // /cluster/leader twice: its 503 during the election is the answer that used to bench every node.
    const reading = readers(cluster.url, ['/rollouts', '/cluster/status', '/cluster/health', '/cluster/leader', '/cluster/leader']);
    const writer = async (n: number) => {
      for (let i = 0; i < n; i++) outcomes.push(await createRollout(cluster.url, randomUUID()));
    };

    await Promise.all([writer(6), writer(6)]);
    const killedAt = Date.now();
    await victim.kill('SIGKILL');
    const last = await lease();
    expect(last.holder).toBe(first);
    await Promise.all([writer(15), writer(15), waitForLeader(first, 60_000)]);
    await reading.stop();

    // Who took over, after what: the dead leader's lease ran out first, and the next epoch is the new leader's.
    const now = await lease();
    expect(now.holder).not.toBe(first);
    expect(Number(now.epoch)).toBe(Number(last.epoch) + 1);
    expect(now.acquired_at.getTime()).toBeGreaterThan(last.expires_at.getTime());
    const elected = await until('the new leader has recorded its election', 10_000, async () => {
      const { rows } = await db.query<{ node_id: string; at: string }>(
        `SELECT node_id, event_data->>'at' AS at FROM cluster_events WHERE event_type = 'leader_elected' AND (event_data->>'term')::int = $1`,
        [Number(now.epoch)],
      );
      return rows.length ? rows : null;
    });
    expect(elected.map((e) => e.node_id)).toEqual([now.holder]);
    const failoverMs = Date.parse(elected[0]!.at) - killedAt;
    console.log(
      `[e2e] failover after SIGKILL: ${failoverMs} ms (TTL ${TTL} s, election interval ${ELECTION_INTERVAL} s); writes ${outcomes.length} (${outcomes.filter((o) => o.ok).length} ok, retried ${outcomes.filter((o) => o.attempts > 1).length}); reads ${reading.reads.length}`,
    );

    // Every write either succeeded or failed with a clear error.
    for (const o of outcomes) {
      if (!o.ok) expect(o.error, JSON.stringify(o)).toMatch(/\w{4,}/);
      else expect(o.id).toMatch(/^ro_/);
    }
    const succeeded = outcomes.filter((o) => o.ok);
    expect(succeeded.filter((o) => o.at > killedAt).length).toBeGreaterThan(10);

    // None applied twice: one rollout per key at most, and each success is that one.
    const { rows } = await db.query<{ key: string; n: string; ids: string[] }>(
      `SELECT spec->'target'->'labels'->>'key' AS key, count(*) AS n, array_agg(id) AS ids FROM rollouts WHERE spec->'target'->>'service' = 'e2e' GROUP BY 1`,
    );
    for (const r of rows) expect(Number(r.n), `key ${r.key}: ${r.ids.join(', ')}`).toBe(1);
    const byKey = new Map(rows.map((r) => [r.key, r.ids[0]]));
    for (const o of succeeded) expect(byKey.get(o.key)).toBe(o.id);

    // Reads answered throughout, the election's "no leader elected" included, and none by the dead node.
    const reads = reading.reads;
    const leaderless = reads.filter((r) => r.status === 503);
    console.log(
      `[e2e] reads during the SIGKILL failover: ${reads.length}, of which ${leaderless.length} answered "no leader elected"; slowest ${Math.max(...reads.map((r) => r.ms))} ms`,
    );
    expect(notAnswers(reads)).toEqual([]);
    expect(leaderless.length).toBeGreaterThan(0);

    // A retry of a write that succeeded replays it.
    const again = await request(
      `${cluster.url}/rollouts`,
      'POST',
      { spec: rolloutSpec(succeeded[0]!.key) },
      { 'idempotency-key': succeeded[0]!.key, 'x-rollout-actor': 'e2e' },
    );
    expect(again.status).toBeLessThan(300);
    expect(again.body.id).toBe(succeeded[0]!.id);
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    await victim.restart();
  }, 180_000);

  it('a follower answers a write with 503 naming the leader; through nginx the write reaches the leader', async () => {
    const leader = await waitForLeader(null, 30_000);
    const follower = cluster.nodes.find((n) => n.id !== leader && alive(n))!;
    const r = await request(`${follower.url}/rollouts/x/pause`, 'POST', {});
    expect(r.status).toBe(503);
    expect(r.headers.get('x-rollout-leader-id')).toBe(leader);
    expect(r.headers.get('x-rollout-leader-url')).toBe(cluster.nodes.find((n) => n.id === leader)!.url);
    expect(r.body.error).toBe(`not the leader: ${leader} is`);
    // Through nginx the same write reaches the leader, which answers for itself.
    const viaNginx = await request(`${cluster.url}/rollouts/x/pause`, 'POST', {}, { 'idempotency-key': randomUUID() });
    expect(viaNginx.status).toBe(404);
    expect(viaNginx.body.error).toBe('unknown rollout x');
    expect(viaNginx.headers.get('x-rollout-node-id')).toBe(leader);
  }, 60_000);

  it('a paused follower, then a paused leader (SIGSTOP): every read through nginx is answered by a live node, and a write lands once, on the new leader', async () => {
    const leader = await waitForLeader(null, 30_000);
    const follower = cluster.nodes.find((n) => n.id !== leader && alive(n))!;
    const leaderNode = cluster.nodes.find((n) => n.id === leader)!;
    const reading = readers(cluster.url, ['/rollouts', '/cluster/leader', '/cluster/health']);
    // nginx tried the paused node and the read came back from another; or a read stalled (the failure this test is about).
    const triedOn = (n: ClusterNodeProcess, since: number) =>
      reading.reads.some((r) => r.startedAt >= since && (r.upstream.includes(port(n)) || r.status === 0));

    // A follower stops answering: reads nginx hands it move on to another node.
    const followerPausedAt = Date.now();
    paused.add(follower.id);
    follower.process.kill('SIGSTOP');
    await until(
      'a read tried on the paused follower came back',
      90_000,
      () => triedOn(follower, followerPausedAt) && reading.reads.filter((r) => r.startedAt > followerPausedAt).length > 20,
    );
    follower.process.kill('SIGCONT');
    paused.delete(follower.id);
    const followerResumedAt = Date.now();

    // The leader stops answering; a write sent now must wait for the take-over, then land once.
    const leaderPausedAt = Date.now();
    paused.add(leader);
    leaderNode.process.kill('SIGSTOP');
    const key = randomUUID();
    const writing = createRollout(cluster.url, key);
    const next = await waitForLeader(leader, 60_000);
    const written = await writing;
    const writeMs = written.at - leaderPausedAt;
    await until('a read tried on the paused leader came back', 90_000, () => triedOn(leaderNode, leaderPausedAt));
    leaderNode.process.kill('SIGCONT');
    paused.delete(leader);
    const leaderResumedAt = Date.now();
    // The old leader finds itself deposed (and answers whatever nginx left in its socket).
    await until(
      'the old leader follows',
      30_000,
      async () => (await request(`${leaderNode.url}/cluster/status`, 'GET').catch(() => null))?.body.state === 'follower',
    );
    await reading.stop();

    const during = (from: number, to: number) => reading.reads.filter((r) => r.startedAt >= from && r.startedAt < to);
    const whileFollowerPaused = during(followerPausedAt, followerResumedAt);
    const whileLeaderPaused = during(leaderPausedAt, leaderResumedAt);
    const figures = (rs: Read[]) =>
      `${rs.length} reads, p50 ${quantile(
        rs.map((r) => r.ms),
        0.5,
      )} ms, max ${Math.max(...rs.map((r) => r.ms))} ms, ${rs.filter((r) => r.upstream.includes(',')).length} moved on`;
    console.log(`[e2e] follower ${follower.id} paused: ${figures(whileFollowerPaused)}`);
    console.log(
      `[e2e] leader ${leader} paused: ${figures(whileLeaderPaused)}; the write took ${writeMs} ms (${written.attempts} attempt(s)) and landed on ${next}`,
    );

    // Every read got an answer, and not from the paused node.
    expect(notAnswers(whileFollowerPaused)).toEqual([]);
    expect(notAnswers(whileLeaderPaused)).toEqual([]);
    expect(whileFollowerPaused.filter((r) => r.node === follower.id)).toEqual([]);
    expect(whileLeaderPaused.filter((r) => r.node === leader)).toEqual([]);

    // The write: applied once, by the new leader.
    expect(written, JSON.stringify(written)).toMatchObject({ ok: true, status: 201 });
    const { rows } = await db.query<{ id: string }>(`SELECT id FROM rollouts WHERE spec->'target'->'labels'->>'key' = $1`, [key]);
    expect(rows.map((r) => r.id)).toEqual([written.id]);
    const { rows: record } = await db.query<{ node_id: string; status: number }>('SELECT node_id, status FROM api_requests WHERE key = $1', [key]);
    expect(record).toEqual([{ node_id: next, status: 201 }]);
  }, 240_000);

  it('every node stalled at once (a loaded host): reads through nginx wait and are answered, never 502', async () => {
    await waitForLeader(null, 30_000);
    const reading = readers(cluster.url, ['/rollouts', '/cluster/status']);
    await until('reads are flowing', 30_000, () => reading.reads.length > 5);
    // Longer than nginx's read timeout on every node in turn: a read begun now times out on each.
    const stallMs = proxyTimeouts(env).readMs * (cluster.nodes.length + 0.5);
    const pausedAt = Date.now();
    for (const n of cluster.nodes) {
      paused.add(n.id);
      n.process.kill('SIGSTOP');
    }
    // Begun during the stall whatever the readers are doing (theirs may all be in flight from before it).
    const during = reading.once('/rollouts');
    await sleep(stallMs); // the fault itself: how long the host stalls
    for (const n of cluster.nodes) {
      n.process.kill('SIGCONT');
      paused.delete(n.id);
    }
    const resumedAt = Date.now();
    // Past nginx's fail_timeout (5 s): the time every node stays benched after its timeout.
    await until('reads went on past the bench', 60_000, () => reading.reads.some((r) => r.startedAt > resumedAt + 6_000));
    await reading.stop();
    const window = reading.reads.filter((r) => r.startedAt >= pausedAt);
    const waited = window.filter((r) => r.startedAt < resumedAt);
    console.log(
      `[e2e] all nodes paused ${stallMs} ms: ${window.length} reads, those begun during the pause took up to ${Math.max(...waited.map((r) => r.ms))} ms`,
    );
    expect(notAnswers(window)).toEqual([]);
    // The read begun during the stall timed out on a paused node, moved on, and was answered once the host came back.
    const read = await during;
    expect(notAnswers([read])).toEqual([]);
    expect(read.upstream.split(',').length, read.upstream).toBeGreaterThan(1);
  }, 120_000);

  it('serves Prometheus metrics with the leadership figures', async () => {
    const leader = await waitForLeader(null, 30_000);
    const node = cluster.nodes.find((n) => n.id === leader)!;
    const res = await fetch(`${node.url}/metrics`);
    const text = await res.text();
    expect(res.headers.get('content-type')).toMatch(/text\/plain/);
    expect(text).toMatch(new RegExp(`rollout_is_leader\\{node_id="${leader}"\\} 1`));
    for (const name of [
      'rollout_leadership_duration_seconds',
      'rollout_elections_won_total',
      'rollout_lease_renewals_total',
      'rollout_cluster_nodes',
      'rollout_last_failover_timestamp_seconds',
    ])
      expect(text).toContain(name);
  });
});

describe('a graceful stop hands over by the wake-up', () => {
  // Followers retry every 10 minutes here and the lease lasts 25: within this test, only the
  // resigning leader's NOTIFY can make a follower campaign again.
  const slow = { CLUSTER_LEASE_TTL: '1500', CLUSTER_HEARTBEAT_INTERVAL: '800', CLUSTER_ELECTION_INTERVAL: '600', CLUSTER_MONITOR_INTERVAL: '1' };
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let cluster: LocalCluster;
  let db: pg.Client;

  beforeAll(async () => {
    database = await freshDatabase('handover');
    cluster = await startCluster({ nodes: 2, env: slow, databaseUrl: database.url });
    db = new pg.Client({ connectionString: database.url });
    await db.connect();
  }, 120_000);

  afterAll(async () => {
    await db?.end();
    await cluster?.stop();
    await database?.drop();
  });

  it('SIGTERM resigns; the follower takes over at the next epoch at once, not at its next retry', async () => {
    const row = await until(
      'a leader',
      30_000,
      async () =>
        (await db.query<{ holder: string | null; epoch: string }>(`SELECT holder, epoch FROM leases WHERE name = 'promotion_leader' AND holder IS NOT NULL`))
          .rows[0],
    );
    const leader = cluster.nodes.find((n) => n.id === row.holder)!;
    const follower = cluster.nodes.find((n) => n !== leader)!;
    // The follower has campaigned once (at start) and lost: it now waits for its retry, 10 minutes away.
    await until('the follower has seen the leader', 30_000, async () => (await request(`${follower.url}/cluster/leader`, 'GET')).body.leader_id === leader.id);
    const { rows: before } = await db.query<{ max: number | null }>('SELECT max(id) AS max FROM cluster_events');

    await leader.kill('SIGTERM');
    expect(leader.process.exitCode).toBe(0);
    const elected = await until(
      'the follower leads',
      30_000,
      async () =>
        (
          await db.query<{ at: string; term: string }>(
            `SELECT event_data->>'at' AS at, event_data->>'term' AS term FROM cluster_events WHERE id > $1 AND event_type = 'leader_elected' AND node_id = $2`,
            [before[0]!.max ?? 0, follower.id],
          )
        ).rows[0],
    ).catch((err: Error) => {
      // What each node logged is the only account of why a hand-over did not happen.
      throw new Error(`${err.message}\n${cluster.nodes.map((n) => `--- ${n.id}\n${n.log()}`).join('\n')}`);
    });
    const { rows } = await db.query<{ node_id: string; event_type: string; at: string; reason: string | null }>(
      `SELECT node_id, event_type, event_data->>'at' AS at, event_data->>'reason' AS reason FROM cluster_events WHERE id > $1 ORDER BY id`,
      [before[0]!.max ?? 0],
    );
    const lost = rows.find((r) => r.event_type === 'leader_lost' && r.node_id === leader.id);
    expect(lost?.reason).toBe('resigned');
    expect(Number(elected.term)).toBe(Number(row.epoch) + 1);
    expect(rows.some((r) => r.event_type === 'node_left' && r.node_id === leader.id)).toBe(true);
    console.log(
      `[e2e] graceful handover by NOTIFY: ${Date.parse(elected.at) - Date.parse(lost!.at)} ms from resign to elected (the follower's next retry was 10 minutes away)`,
    );
  }, 120_000);
});

/**
 * Two TCP proxies in front of one node, for nginx's write pool: once armed,
 * the next reply the node sends on either is swallowed and its connection
 * cut — the write was delivered and committed, the answer lost, as when a
 * leader dies right after its commit. nginx then moves the write on to the
 * other proxy, which is the same node again. Each proxy notes the
 * Idempotency-Key of every request it forwards.
 */
async function cuttingProxies(targetPort: number): Promise<{ ports: number[]; keys: (string | null)[]; arm(): void; close(): Promise<void> }> {
  let armed = false;
  const keys: (string | null)[] = [];
  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  for (let i = 0; i < 2; i++) {
    const server = createServer((client) => {
      const upstream = connect(targetPort, '127.0.0.1');
      sockets.add(client).add(upstream);
      const close = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
      client.on('data', (b: Buffer) => {
        const text = b.toString('latin1');
        if (/^[A-Z]+ \//.test(text)) keys.push(/\r\nidempotency-key: *([^\r\n]*)/i.exec(text)?.[1] ?? null);
        upstream.write(b);
      });
      upstream.on('data', (b: Buffer) => {
        if (armed) {
          armed = false;
          close();
          return;
        }
        client.write(b);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    servers.push(server);
  }
  return {
    ports: servers.map((s) => (s.address() as { port: number }).port),
    keys,
    arm: () => {
      armed = true;
      keys.length = 0;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    },
  };
}

describe('nginx moves a write on to another node only with an Idempotency-Key', () => {
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let node: ControlPlaneNode;
  let server: Awaited<ReturnType<typeof serveApi>>;
  let proxies: Awaited<ReturnType<typeof cuttingProxies>>;
  let nginx: Awaited<ReturnType<typeof startNginx>>;

  beforeAll(async () => {
    database = await freshDatabase('retry');
    const port = await freePort();
    node = await ControlPlaneNode.open({ nodeId: 'only', store: { kind: 'postgres', databaseUrl: database.url }, port, elector: 'static' });
    server = await serveApi(nodeApi(node, nodeMetrics(node)), { port });
    await node.start();
    proxies = await cuttingProxies(port);
    nginx = await startNginx(proxies.ports);
  }, 60_000);

  afterAll(async () => {
    await nginx?.stop();
    await proxies?.close();
    await server?.close();
    await node?.stop();
    await database?.drop();
  });

  const count = async (table: 'rollouts' | 'runs') => Number((await node.sql.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]!.n);

  for (const [what, table, path, body] of [
    ['POST /rollouts', 'rollouts', '/rollouts', () => ({ spec: rolloutSpec(randomUUID()) })],
    ['POST /runs', 'runs', '/runs', () => ({ items: [{ n: randomUUID() }] })],
  ] as const) {
    it(`${what} without a key, whose node commits and loses the answer: sent on with nginx's own key, applied once`, async () => {
      const before = await count(table);
      proxies.arm();
      const res = await request(`${nginx.url}${path}`, 'POST', body());
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(await count(table)).toBe(before + 1);
      // Tried twice (the cut, then the other proxy), both times with the same key of nginx's making.
      expect(proxies.keys).toHaveLength(2);
      expect(proxies.keys[0]).toMatch(/^[0-9a-f]{32}$/);
      expect(proxies.keys[1]).toBe(proxies.keys[0]);
      expect(res.headers.get('idempotent-replayed')).toBe('true');
    });

    it(`${what} with the client's key, whose node commits and loses the answer: sent on with that key, applied once`, async () => {
      const before = await count(table);
      const key = randomUUID();
      proxies.arm();
      const res = await request(`${nginx.url}${path}`, 'POST', body(), { 'idempotency-key': key });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(proxies.keys).toEqual([key, key]);
      expect(await count(table)).toBe(before + 1);
    });
  }
});
