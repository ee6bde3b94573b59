import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type LocalCluster } from '../../infra/local/cluster.js';

/**
 * The local cluster end to end: its own PostgreSQL, three `rollout serve`
 * processes and nginx with the shipped configuration. Writes and reads go
 * through nginx while the leader is killed with SIGKILL; then the new leader
 * is stopped gracefully and must be replaced at once.
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

async function request(url: string, method: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(url, { method, headers: { 'content-type': 'application/json', ...headers }, ...(body === undefined ? {} : { body: JSON.stringify(body) }), signal: AbortSignal.timeout(15_000) });
  const text = await res.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { error: `non-JSON answer: ${text.slice(0, 200)}` };
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** A client as the CLI behaves: one Idempotency-Key per write, kept across its retries. */
async function createRollout(base: string, key: string): Promise<Outcome> {
  const spec = { target: { service: 'e2e', version: 'v2', labels: { key } }, preset: 'linear', stepPercent: 50, bakeSeconds: 60 };
  let last: Outcome = { key, ok: false, status: 0, error: 'not sent', attempts: 0, at: Date.now() };
  for (let attempt = 1; attempt <= 8; attempt++) {
    try {
      const r = await request(`${base}/rollouts`, 'POST', { spec }, { 'idempotency-key': key, 'x-rollout-actor': 'e2e' });
      last = { key, ok: r.status === 201 || r.status === 200, status: r.status, attempts: attempt, at: Date.now(), ...(typeof r.body.id === 'string' ? { id: r.body.id } : {}), ...(typeof r.body.error === 'string' ? { error: r.body.error } : {}) };
      if (r.status < 500) return last;
    } catch (err) {
      last = { key, ok: false, status: 0, error: err instanceof Error ? err.message : String(err), attempts: attempt, at: Date.now() };
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  return last;
}

describe('three nodes behind nginx', () => {
  let cluster: LocalCluster;
  let db: pg.Client;

  beforeAll(async () => {
    cluster = await startCluster({ env });
    db = new pg.Client({ connectionString: cluster.databaseUrl });
    await db.connect();
  }, 120_000);

  afterAll(async () => {
    await db?.end();
    await cluster?.stop();
  });

  async function leaderOf(): Promise<string | null> {
    for (const n of cluster.nodes) {
      if (n.process.exitCode !== null || n.process.signalCode !== null) continue;
      const r = await request(`${n.url}/cluster/leader`, 'GET').catch(() => null);
      if (r?.status === 200) return String(r.body.leader_id);
    }
    return null;
  }

  async function waitForLeader(not: string | null, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const l = await leaderOf();
      if (l && l !== not) return l;
      if (Date.now() > deadline) throw new Error(`no new leader after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('survives SIGKILL of the leader: a new leader within TTL + one election interval, every write applied at most once, reads keep answering', async () => {
    const first = await waitForLeader(null, 30_000);
    const victim = cluster.nodes.find((n) => n.id === first)!;

    const outcomes: Outcome[] = [];
    const readFailures: string[] = [];
    let reads = 0;
    let writing = true;
    const reader = (async () => {
      while (writing) {
        for (const path of ['/rollouts', '/cluster/status']) {
          const r = await request(`${cluster.url}${path}`, 'GET').catch((err: unknown) => ({ status: 0, body: { error: String(err) } }));
          reads++;
          if (r.status !== 200) readFailures.push(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const writer = async (n: number) => {
      for (let i = 0; i < n; i++) outcomes.push(await createRollout(cluster.url, randomUUID()));
    };

    await Promise.all([writer(6), writer(6)]);
    const killedAt = Date.now();
    await victim.kill('SIGKILL');
    await Promise.all([writer(15), writer(15), waitForLeader(first, (TTL + ELECTION_INTERVAL) * 1000 + 10_000)]);
    writing = false;
    await reader;

    // When the new leader was elected, by its own event (not by our polling).
    const { rows: elected } = await db.query<{ node_id: string; at: string }>(
      `SELECT node_id, event_data->>'at' AS at FROM cluster_events WHERE event_type = 'leader_elected' AND node_id <> $1 ORDER BY id`,
      [first],
    );
    expect(elected.length).toBeGreaterThan(0);
    const failoverMs = Date.parse(elected[0]!.at) - killedAt;
    // The lease was renewed at most one heartbeat before the kill, so expiry + the skew margin comes sooner than TTL + one interval.
    // 1 s of slack for a loaded machine's scheduling.
    console.log(`[e2e] failover after SIGKILL: ${failoverMs} ms (TTL ${TTL} s); writes ${outcomes.length} (${outcomes.filter((o) => o.ok).length} ok, retried ${outcomes.filter((o) => o.attempts > 1).length}); reads ${reads}`);
    expect(failoverMs).toBeLessThanOrEqual((TTL + ELECTION_INTERVAL) * 1000 + 1_000);

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

    // Reads answered throughout (nginx moves reads off the dead node).
    expect(reads).toBeGreaterThan(10);
    expect(readFailures).toEqual([]);

    // A retry of a write that succeeded replays it.
    const again = await request(`${cluster.url}/rollouts`, 'POST', { spec: { target: { service: 'e2e', version: 'v2', labels: { key: succeeded[0]!.key } }, preset: 'linear', stepPercent: 50, bakeSeconds: 60 } }, { 'idempotency-key': succeeded[0]!.key });
    expect(again.status).toBeLessThan(300);
    expect(again.body.id).toBe(succeeded[0]!.id);
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    await victim.restart();
  }, 120_000);

  it('a follower answers a write with 503 naming the leader; through nginx the write reaches the leader', async () => {
    const leader = await waitForLeader(null, 30_000);
    const follower = cluster.nodes.find((n) => n.id !== leader && n.process.exitCode === null)!;
    const r = await request(`${follower.url}/rollouts/x/pause`, 'POST', {});
    expect(r.status).toBe(503);
    expect(r.headers.get('x-rollout-leader-id')).toBe(leader);
    expect(r.headers.get('x-rollout-leader-url')).toBe(cluster.nodes.find((n) => n.id === leader)!.url);
    expect(r.body.error).toBe(`not the leader: ${leader} is`);
    // Through nginx the same write reaches the leader, which answers for itself.
    const viaNginx = await request(`${cluster.url}/rollouts/x/pause`, 'POST', {}, { 'idempotency-key': randomUUID() });
    expect(viaNginx.status).toBe(404);
    expect(viaNginx.body.error).toBe('unknown rollout x');
  }, 60_000);

  it('a graceful stop resigns: a follower takes over within 100 ms (LISTEN/NOTIFY, not a poll)', async () => {
    const leader = await waitForLeader(null, 30_000);
    const node = cluster.nodes.find((n) => n.id === leader)!;
    const { rows: before } = await db.query<{ max: number | null }>('SELECT max(id) AS max FROM cluster_events');
    await node.kill('SIGTERM');
    expect(node.process.exitCode).toBe(0);
    const next = await waitForLeader(leader, 10_000);
    const { rows } = await db.query<{ node_id: string; event_type: string; at: string; reason: string | null }>(
      `SELECT node_id, event_type, event_data->>'at' AS at, event_data->>'reason' AS reason FROM cluster_events WHERE id > $1 ORDER BY id`,
      [before[0]!.max ?? 0],
    );
    const lost = rows.find((r) => r.event_type === 'leader_lost' && r.node_id === leader);
    const elected = rows.find((r) => r.event_type === 'leader_elected' && r.node_id === next);
    expect(lost?.reason).toBe('resigned');
    expect(elected).toBeDefined();
    const handoverMs = Date.parse(elected!.at) - Date.parse(lost!.at);
    console.log(`[e2e] graceful handover: ${handoverMs} ms`);
    expect(handoverMs).toBeGreaterThanOrEqual(0);
    expect(handoverMs).toBeLessThan(100);
    expect(rows.some((r) => r.event_type === 'node_left' && r.node_id === leader)).toBe(true);
  }, 60_000);

  it('serves Prometheus metrics with the leadership figures', async () => {
    const leader = await waitForLeader(null, 30_000);
    const node = cluster.nodes.find((n) => n.id === leader)!;
    const res = await fetch(`${node.url}/metrics`);
    const text = await res.text();
    expect(res.headers.get('content-type')).toMatch(/text\/plain/);
    expect(text).toMatch(new RegExp(`rollout_is_leader\\{node_id="${leader}"\\} 1`));
    for (const name of ['rollout_leadership_duration_seconds', 'rollout_elections_won_total', 'rollout_lease_renewals_total', 'rollout_cluster_nodes', 'rollout_last_failover_timestamp_seconds']) expect(text).toContain(name);
  });
});
