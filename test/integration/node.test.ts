import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { nodeMetrics } from '../../shared/runtimes/node/metrics.js';
import { nodeApi, READ_DEADLINE_MS } from '../../shared/runtimes/node/node-api.js';
import { ASSIGNMENT_READ_DEADLINE_MS } from '../../shared/api/handler.js';
import { bucketOf } from '../../shared/rollout/assignment.js';
import { ControlPlaneNode, type NodeConfigInput } from '../../shared/runtimes/node/node.js';
import { freePort } from '../../infra/local/processes.js';
import { databaseForFile } from '../support/database.js';
import { eventually as until } from '../support/gate.js';
import { rollout } from '../support/cli.js';
import { FaultyProxy } from '../support/tcp-proxy.js';
import type { AdvisoryLockElector } from '../../shared/adapters/postgres/advisory-lock-elector.js';
import type { LeaseElector } from '../../shared/lease/elector.js';
import { mockBackend } from '../../shared/ledger/backends.js';
import { HttpCoordinatorClient } from '../../shared/adapters/http/coordinator-client.js';
import { Worker } from '../../shared/ledger/worker/index.js';
import { LedgerWorkQueue } from '../../shared/adapters/postgres/ledger-queue.js';

/**
 * Cluster nodes in this process on a real PostgreSQL (a database of their
 * own on the harness's server): leader-only writes, idempotent writes, and
 * the database outage behaviour, with the outage made by a proxy.
 */
const database = databaseForFile('node');

const running: { node: ControlPlaneNode; close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const r of running.splice(0)) await r.close();
});

const fast = {
  leaseTtlSeconds: 2,
  heartbeatIntervalSeconds: 0.6,
  electionIntervalSeconds: 0.4,
  electionTimeoutSeconds: 2,
  monitorIntervalSeconds: 0.5,
  tickIntervalSeconds: 0.5,
};

async function startNode(nodeId: string, url: string, extra: Partial<NodeConfigInput> = {}, start = true) {
  const port = await freePort();
  const node = await ControlPlaneNode.open({ nodeId, store: { kind: 'postgres', databaseUrl: url }, port, ...fast, ...extra });
  const server = await serveApi(nodeApi(node, nodeMetrics(node)), { port });
  if (start) await node.start();
  const handle = {
    node,
    url: server.url,
    close: async () => {
      await node.stop();
      await server.close();
    },
  };
  running.push(handle);
  return handle;
}

async function http(url: string, method = 'GET', body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method,
    redirect: 'manual',
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : null) as Record<string, unknown>, text };
}

const spec = { target: { service: 'svc', version: 'v2' }, preset: 'linear', stepPercent: 50, bakeSeconds: 60 };

describe('cluster node', () => {
  it('refuses writes on a follower (503 naming the leader, or 307 when told to redirect) and with no leader at all', async () => {
    const a = await startNode('n-a', database.url);
    await until('a leads', 5_000, () => a.node.state === 'leader');
    const b = await startNode('n-b', database.url);
    const c = await startNode('n-c', database.url, { redirectWrites: true });
    await until('b sees a', 5_000, async () => (await b.node.refreshLeader())?.id === 'n-a');

    const r = await http(`${b.url}/rollouts`, 'POST', { spec });
    expect(r.status).toBe(503);
    expect(r.headers.get('x-rollout-leader-id')).toBe('n-a');
    expect(r.headers.get('x-rollout-leader-url')).toBe(a.url);
    expect((r.body.leader as { leader_id: string }).leader_id).toBe('n-a');

    const redirected = await http(`${c.url}/rollouts`, 'POST', { spec });
    expect(redirected.status).toBe(307);
    expect(redirected.headers.get('location')).toBe(`${a.url}/rollouts`);

    // Signals are not leader-only: stored by whichever node gets them.
    const sig = await http(`${b.url}/events`, 'POST', { type: 'rollout.alarm_changed', alarm: 'x', state: 'OK', changedAt: Date.now() });
    expect(sig.status).toBe(202);
    expect(sig.body.evaluated).toBe(false);
    const bad = await http(`${b.url}/events`, 'POST', {
      type: 'rollout.metrics_reported',
      rolloutId: 'r',
      stage: 0,
      requests: 1,
      errors: 2,
      observedAt: Date.now(),
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/errors: must not exceed requests/);

    // Nobody leads: the lease released and no node campaigning (a node not started yet).
    await a.close();
    running.splice(running.indexOf(a), 1);
    await b.close();
    await c.close();
    running.splice(0);
    const lone = await startNode('n-d', database.url, {}, false);
    const none = await http(`${lone.url}/rollouts`, 'POST', { spec });
    expect(none.status).toBe(503);
    expect(none.body.error).toBe('no leader elected');
  }, 30_000);

  it('applies a write with an Idempotency-Key once: a retry replays it, the key on another request is refused', async () => {
    const a = await startNode('n-idem', database.url);
    await until('leads', 5_000, () => a.node.state === 'leader');
    const key = randomUUID();
    const first = await http(`${a.url}/rollouts`, 'POST', { spec }, { 'idempotency-key': key });
    expect(first.status).toBe(201);
    const again = await http(`${a.url}/rollouts`, 'POST', { spec }, { 'idempotency-key': key });
    expect(again.status).toBe(201);
    expect(again.body.id).toBe(first.body.id);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const other = await http(`${a.url}/rollouts`, 'POST', { spec: { ...spec, bakeSeconds: 5 } }, { 'idempotency-key': key });
    expect(other.status).toBe(422);
    expect(other.body.error).toMatch(/already used for a different request/);
    // The first stage started at once (not at the next tick), and its event left the outbox after the commit.
    const view = await http(`${a.url}/rollouts/${String(first.body.id)}`);
    expect((view.body.stages as { phase: string }[])[0]!.phase).toBe('active');
    const { rows } = await a.node.sql.query<{ n: string }>('SELECT count(*) AS n FROM rollout_events WHERE rollout_id = $1 AND published_at IS NULL', [
      first.body.id,
    ]);
    expect(Number(rows[0]!.n)).toBe(0);
  }, 30_000);

  it('an idempotency record never keeps a "try again": the retry runs the request again', async () => {
    const a = await startNode('n-retryable', database.url);
    await until('leads', 5_000, () => a.node.state === 'leader');
    const created = await http(`${a.url}/rollouts`, 'POST', { id: 'busy', spec }, { 'idempotency-key': randomUUID() });
    expect(created.status).toBe(201);
    // Every update of the rollout row is swallowed, as if another writer moved it each time: the command gives up.
    await a.node.sql.query(
      `CREATE FUNCTION keep_changing() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF OLD.id = 'busy' THEN RETURN NULL; END IF; RETURN NEW; END $$`,
    );
    await a.node.sql.query('CREATE TRIGGER keep_changing BEFORE UPDATE ON rollouts FOR EACH ROW EXECUTE FUNCTION keep_changing()');
    const key = randomUUID();
    try {
      const refused = await http(`${a.url}/rollouts/busy/pause`, 'POST', {}, { 'idempotency-key': key });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatch(/kept changing; try again/);
    } finally {
      await a.node.sql.query('DROP TRIGGER keep_changing ON rollouts');
      await a.node.sql.query('DROP FUNCTION keep_changing()');
    }
    const retried = await http(`${a.url}/rollouts/busy/pause`, 'POST', {}, { 'idempotency-key': key });
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    expect(retried.status).toBe(200);
    expect(retried.body.action).toMatchObject({ transition: 'pause', applied: true });
    // The answer that applied something is the one kept.
    const again = await http(`${a.url}/rollouts/busy/pause`, 'POST', {}, { 'idempotency-key': key });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(retried.body);
  }, 30_000);

  it('an idempotency record is bound to who asked: the same key and request from another actor is refused, not answered with the first one', async () => {
    const a = await startNode('n-actor', database.url);
    await until('leads', 5_000, () => a.node.state === 'leader');
    const key = randomUUID();
    const alice = await http(`${a.url}/rollouts`, 'POST', { spec }, { 'idempotency-key': key, 'x-rollout-actor': 'alice' });
    expect(alice.status).toBe(201);
    const mallory = await http(`${a.url}/rollouts`, 'POST', { spec }, { 'idempotency-key': key, 'x-rollout-actor': 'mallory' });
    expect(mallory.status).toBe(422);
    expect(mallory.body.error).toMatch(/already used for a different request/);
    expect(mallory.body.id).toBeUndefined();
    const aliceAgain = await http(`${a.url}/rollouts`, 'POST', { spec }, { 'idempotency-key': key, 'x-rollout-actor': 'alice' });
    expect(aliceAgain.headers.get('idempotent-replayed')).toBe('true');
    expect(aliceAgain.body.id).toBe(alice.body.id);
  }, 30_000);

  it('bad paths and conflicting runs on a node: malformed percent-encoding is a 400 (not a store outage), a run re-sent with another spec is a 409', async () => {
    const a = await startNode('n-input', database.url);
    await until('leads', 5_000, () => a.node.state === 'leader');
    const read = await http(`${a.url}/rollouts/%E0`);
    expect(read.status).toBe(400);
    expect(read.body.error).toMatch(/^path segment "%E0" is not valid percent-encoding/);
    expect(read.headers.get('x-rollout-stale')).toBeNull();
    for (const headers of [{}, { 'idempotency-key': randomUUID() }] as Record<string, string>[]) {
      const write = await http(`${a.url}/rollouts/%E0/pause`, 'POST', {}, headers);
      expect(write.status).toBe(400);
      expect(write.body.error).toMatch(/^path segment "%E0" is not valid percent-encoding/);
    }
    const runId = `conflict-${randomUUID().slice(0, 8)}`;
    const first = await http(`${a.url}/runs`, 'POST', { id: runId, spec: { model: 'a' }, items: [{ i: 1 }] }, { 'idempotency-key': randomUUID() });
    expect(first.status).toBe(201);
    const other = await http(`${a.url}/runs`, 'POST', { id: runId, spec: { model: 'b' }, items: [{ i: 2 }] }, { 'idempotency-key': randomUUID() });
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({ error: `run ${runId} exists with a different spec`, spec: { model: 'a' } });
    expect(await a.node.plane.stores.ledger.counts(runId)).toMatchObject({ pending: 1 });
  }, 30_000);

  it('a run cancelled on the leader: its coordinator fails the pending items at once, after the commit; the replayed answer is the recorded one', async () => {
    const a = await startNode('n-cancel', database.url);
    await until('leads', 5_000, () => a.node.state === 'leader');
    const runId = `cancel-${randomUUID().slice(0, 8)}`;
    expect(
      (await http(`${a.url}/runs`, 'POST', { id: runId, items: Array.from({ length: 30 }, (_, i) => ({ i })) }, { 'idempotency-key': randomUUID() })).status,
    ).toBe(201);
    const key = randomUUID();
    const cancelled = await http(`${a.url}/runs/${runId}/cancel`, 'POST', { reason: 'superseded' }, { 'idempotency-key': key });
    expect(cancelled).toMatchObject({ status: 200, body: { id: runId, first: true, pendingLeft: 0, cancelled: { reason: 'superseded' } } });
    expect(await a.node.plane.stores.ledger.counts(runId)).toEqual({ pending: 0, running: 0, done: 0, failed: 30 });
    const item = (await a.node.plane.stores.ledger.items(runId, { limit: 1 })).items[0]!;
    expect(item.error).toMatch(/^cancelled: superseded \(by /);
    const replayed = await http(`${a.url}/runs/${runId}/cancel`, 'POST', { reason: 'superseded' }, { 'idempotency-key': key });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.body).toMatchObject({ first: true });
    expect(replayed.body).not.toHaveProperty('pendingLeft');
  }, 30_000);

  it('advisory-lock elector: one leader whose epoch fences; a graceful stop hands over by the wake-up, not the retry', async () => {
    // Followers retry only after the test is over: a take-over within it can only come from the resign's NOTIFY.
    const retryLater = { elector: 'advisory-lock', electionIntervalSeconds: 600 } as const;
    const a = await startNode('n-lock-a', database.url, retryLater);
    await until('a leads', 5_000, () => a.node.state === 'leader');
    const b = await startNode('n-lock-b', database.url, retryLater);
    const bElector = b.node.plane.elector as AdvisoryLockElector;
    await until('b has tried for the lock', 5_000, () => bElector.stats.attempts === 1 && b.node.state === 'follower');
    expect(bElector.stats.acquisitions).toBe(0);
    const epoch = a.node.term;
    const created = await http(`${a.url}/rollouts`, 'POST', { spec }, { 'idempotency-key': randomUUID() });
    expect(created.status).toBe(201);
    const stoppedAt = Date.now();
    await a.close();
    running.splice(running.indexOf(a), 1);
    await until('b leads', 10_000, () => b.node.state === 'leader');
    console.log(`[node] advisory-lock handover by NOTIFY: ${Date.now() - stoppedAt} ms after the stop began`);
    // One try at start, one on the notice.
    expect(bElector.stats).toEqual({ attempts: 2, acquisitions: 1 });
    expect(b.node.term).toBe(epoch + 1);
    const cmd = await http(`${b.url}/rollouts/${String(created.body.id)}/pause`, 'POST', {}, { 'idempotency-key': randomUUID() });
    expect(cmd.status).toBe(200);
  }, 30_000);

  it("every session of a node's pool ends an idle transaction after one lease TTL, the migration's first sessions too", async () => {
    const a = await startNode('n-sessions', database.url, {}, false);
    // Ten queries held open at once take all ten sessions of the pool, whichever opened first.
    const rows = await Promise.all(
      Array.from({ length: 10 }, () =>
        a.node.sql.query<{ pid: number; limit: string }>(
          "SELECT pg_backend_pid() AS pid, current_setting('idle_in_transaction_session_timeout') AS limit FROM pg_sleep(0.2)",
        ),
      ),
    );
    const sessions = new Map(rows.map((r) => [r.rows[0]!.pid, r.rows[0]!.limit]));
    expect(sessions.size).toBe(10);
    expect(new Set(sessions.values())).toEqual(new Set([`${fast.leaseTtlSeconds}s`]));
  });

  it('refuses a configuration it cannot run, naming the field', async () => {
    await expect(ControlPlaneNode.open({ nodeId: 'bad', store: { kind: 'pglite', dataDir: null }, elector: 'advisory-lock' })).rejects.toThrow(
      /elector: advisory-lock needs a PostgreSQL server/,
    );
    await expect(
      ControlPlaneNode.open({ nodeId: 'bad', store: { kind: 'postgres', databaseUrl: database.url }, leaseTtlSeconds: 5, heartbeatIntervalSeconds: 10 }),
    ).rejects.toThrow(/leaseTtlSeconds: needs lease TTL \(5\) > heartbeat interval \(10\)/);
    await expect(ControlPlaneNode.open({ nodeId: 'has space', store: { kind: 'pglite', dataDir: null } })).rejects.toThrow(/nodeId/);
  });

  it('the CLI against nodes: a write sent to a follower is followed to the leader once; events publish moves a rollout; serve refuses bad timings', async () => {
    const a = await startNode('n-cli-a', database.url);
    await until('a leads', 5_000, () => a.node.state === 'leader');
    const b = await startNode('n-cli-b', database.url);
    await until('b sees a', 5_000, async () => (await b.node.refreshLeader())?.id === 'n-cli-a');
    const specFile = join(mkdtempSync(join(tmpdir(), 'rollout-node-')), 'spec.json');
    writeFileSync(
      specFile,
      JSON.stringify({
        target: { service: 'cli', version: 'v2' },
        stages: [
          { name: 'one', percent: 50, bakeSeconds: 0, gates: { minRequests: 10 } },
          { name: 'two', percent: 100, bakeSeconds: 0, gates: { minRequests: 10 } },
        ],
      }),
    );
    const created = await rollout(['rollouts', 'create', '--file', specFile, '--id', 'cli-ro', '--url', b.url]);
    expect(created.code, created.err).toBe(0);
    expect(created.out.trim()).toBe('created cli-ro');

    const sig = await rollout([
      'events',
      'publish',
      '--type',
      'rollout.metrics_reported',
      '--rollout',
      'cli-ro',
      '--stage',
      '0',
      '--requests',
      '20',
      '--errors',
      '0',
      '--url',
      a.url,
    ]);
    expect(sig.code, sig.err).toBe(0);
    expect(sig.out.trim()).toBe('accepted (stored); evaluated: promote');
    const got = await rollout(['rollouts', 'get', 'cli-ro', '--url', a.url, '--json']);
    expect((JSON.parse(got.out) as { stages: { phase: string }[] }).stages.map((s) => s.phase)).toEqual(['promoted', 'active']);

    const bad = await rollout([
      'events',
      'publish',
      '--type',
      'rollout.metrics_reported',
      '--rollout',
      'cli-ro',
      '--stage',
      '0',
      '--requests',
      '5',
      '--errors',
      '9',
      '--url',
      a.url,
    ]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/errors: must not exceed requests/);

    const events = await rollout(['cluster', 'events', '--limit', '500', '--url', b.url]);
    expect(events.code, events.err).toBe(0);
    expect(events.out.split('\n')[0]).toMatch(/^TIME\s+NODE\s+EVENT\s+DETAILS$/);
    expect(events.out).toMatch(/n-cli-a\s+leader_elected\s+term=\d+/);
    expect(events.out, events.out).toMatch(/n-cli-b\s+node_joined\s+apiUrl=http/);
    const badLimit = await rollout(['cluster', 'events', '--limit', '0', '--url', b.url]);
    expect(badLimit.code).toBe(2);
    expect(badLimit.err).toMatch(/limit: a whole number from 1 to 500, got "0"/);

    const serve = await rollout(['serve', '--lease-ttl', '5', '--heartbeat-interval', '10'], { CLUSTER_NODE_ID: 'n-bad', DATABASE_URL: database.url });
    expect(serve.code).toBe(2);
    expect(serve.err).toMatch(/leaseTtlSeconds: needs lease TTL \(5\) > heartbeat interval \(10\)/);
    const badScan = await rollout(['serve', '--scan-interval', '0'], { CLUSTER_NODE_ID: 'n-bad', DATABASE_URL: database.url });
    expect(badScan.code).toBe(2);
    expect(badScan.err).toMatch(/--scan-interval must be a positive number of seconds, got "0"/);
    const noDb = await rollout(['serve'], { CLUSTER_NODE_ID: 'n-bad', DATABASE_URL: '' });
    expect(noDb.code).toBe(2);
    expect(noDb.err).toMatch(/store.databaseUrl: DATABASE_URL is required for a PostgreSQL node/);
  }, 270_000);

  it('rollouts get: a tree of stages (percent, bake, gates against their thresholds, what it waits for, the last transitions); --watch redraws when metrics come in, not only on a transition', async () => {
    const a = await startNode('n-watch', database.url);
    await until('a leads', 5_000, () => a.node.state === 'leader');
    const created = await http(`${a.url}/rollouts`, 'POST', {
      id: 'watched',
      spec: {
        target: { service: 'watch', version: 'v2', stableVersion: 'v1' },
        stages: [
          { name: 'canary', percent: 10, bakeSeconds: 3_600, gates: { minRequests: 10, maxErrorRate: 0.05 } },
          { name: 'all', percent: 100, bakeSeconds: 0 },
        ],
      },
    });
    expect(created.status).toBe(201);
    await until('canary active', 30_000, async () => ((await http(`${a.url}/rollouts/watched`)).body.stages as { phase: string }[])[0]!.phase === 'active');

    const got = await rollout(['rollouts', 'get', 'watched', '--url', a.url]);
    expect(got.code, got.err).toBe(0);
    expect(got.out).toMatch(/^watched {2}running {2}attempt 1\nwatch: v1 → v2\nwaiting for:\n/);
    expect(got.out).toMatch(/^ {2}- the bake, until \S+Z \(3600 s\)$/m);
    expect(got.out).toMatch(/^ {2}- 10 requests reported \(0 so far\)$/m);
    expect(got.out).toMatch(/^● canary +10% {2}active +bake \d+ s of 3600 s, \d+ s left$/m);
    expect(got.out).toMatch(/^│ └ metrics: none reported · minRequests 10, maxErrorRate 0\.05$/m);
    expect(got.out).toMatch(/^○ all +100% {2}pending +bake 0 s$/m);
    expect(got.out).toMatch(/^last transitions\n(.*\n)*?\S+\s+stage_activated\s+canary 10%/m);

    // Into a pipe, each change is appended once: a draw before the metrics, one after them, one when it ends.
    let drawn = '';
    const watching = rollout(['rollouts', 'get', 'watched', '--watch', '--poll', '200ms', '--url', a.url], {}, undefined, (out) => (drawn = out));
    await until('the first draw', 60_000, () => drawn.includes('metrics: none reported'));
    const metrics = { type: 'rollout.metrics_reported', rolloutId: 'watched', stage: 0, requests: 40, errors: 1, observedAt: Date.now() };
    expect((await http(`${a.url}/events`, 'POST', metrics)).status).toBe(202);
    await until('a draw with the metrics', 60_000, () => drawn.includes('metrics: 40 requests, 1 errors (2.50 %) · minRequests 10, maxErrorRate 0.05'));
    expect(drawn).not.toMatch(/aborted/);
    expect((await http(`${a.url}/rollouts/watched/abort`, 'POST', { reason: 'seen enough' })).status).toBe(200);
    const watched = await watching;
    expect(watched.code, watched.err).toBe(0);
    expect(watched.out).toMatch(/^watched {2}aborted {2}\(seen enough\)/m);
    expect(watched.out.split('metrics: 40 requests').length - 1).toBeGreaterThanOrEqual(2);
  }, 120_000);

  it('a remote worker asks a follower for work: it is sent on to the leader, whose coordinator steals for it', async () => {
    const a = await startNode('n-steal-a', database.url);
    await until('a leads', 5_000, () => a.node.state === 'leader');
    const b = await startNode('n-steal-b', database.url);
    const runId = `steal-${randomUUID().slice(0, 8)}`;
    const created = await http(
      `${a.url}/runs`,
      'POST',
      { id: runId, items: Array.from({ length: 20 }, (_, i) => ({ i })) },
      { 'idempotency-key': randomUUID() },
    );
    expect(created.status).toBe(201);
    // One worker claims everything and runs nothing yet: all of it is stealable.
    const hog = new Worker({
      runId,
      workerId: 'hog',
      ledger: b.node.plane.stores.ledger,
      queue: new LedgerWorkQueue(b.node.sql, b.node.wake, runId, null).forWorker('hog'),
      backend: mockBackend(),
      waitSeconds: 0,
      receiveBatch: 20,
    });
    expect(await hog.pull(undefined, 0)).toBe(20);
    const notice = await new HttpCoordinatorClient(`${b.url}/coordinator`, runId).requestWork('idle');
    expect(notice.victim).toBe('hog');
    expect(notice.items.length).toBeGreaterThan(0);
    const state = await http(`${b.url}/ui/state`);
    expect((state.body.runs as { id: string; steals: number }[]).find((r) => r.id === runId)?.steals).toBe(notice.items.length);
  }, 30_000);

  it("a store that stops answering (no error, no reply): reads answer by the node's own deadline, from the last good answer, and health says degraded", async () => {
    const u = new URL(database.url);
    const proxy = await new FaultyProxy(u.hostname, Number(u.port)).start();
    u.port = String(proxy.port);
    try {
      // Every assignment reads the store here (no read served again), so a silent store shows on the next answer.
      const a = await startNode('n-silent', u.toString(), { assignmentReadMs: 0 });
      await until('leads', 5_000, () => a.node.state === 'leader');
      const fresh = await http(`${a.url}/rollouts`);
      expect(fresh.status).toBe(200);
      const { id } = (await http(`${a.url}/rollouts`, 'POST', { spec }, { 'idempotency-key': randomUUID() })).body as { id: string };
      const assignment = (entity: string, headers: Record<string, string> = {}) =>
        http(`${a.url}/rollouts/${id}/assignment?entity=${entity}`, 'GET', undefined, headers);
      // The leader activates the first stage (50 %, a 60 s bake): the answer holds still from then on.
      await until(
        'the first stage is active',
        5_000,
        async () => ((await http(`${a.url}/rollouts/${id}`)).body.stages as { phase: string }[])[0]!.phase === 'active',
      );
      const asked = await assignment('host-a');
      expect(asked.body).toMatchObject({ entity: 'host-a', percent: 50, stage: '50%' });
      // The route's own caching survives the node's guard; anything else is never cached.
      expect(asked.headers.get('cache-control')).toBe('private, max-age=5');
      expect(fresh.headers.get('cache-control')).toBe('no-store');
      // Over HTTP, an unchanged answer is a 304 with no body.
      expect(await assignment('host-a', { 'if-none-match': asked.headers.get('etag')! })).toMatchObject({ status: 304, text: '' });
      proxy.blackhole(true);
      // The rollout's last good read answers every entity, the ones never asked about before too, and says so.
      const staleA = await assignment('host-a');
      expect(staleA).toMatchObject({
        status: 200,
        body: {
          entity: 'host-a',
          variant: asked.body.variant,
          bucket: asked.body.bucket,
          stale: { reason: `store unreachable: no answer within ${ASSIGNMENT_READ_DEADLINE_MS} ms` },
        },
      });
      expect(staleA.headers.get('x-rollout-stale')).toBe('true');
      expect(staleA.headers.get('cache-control')).toBe('no-store');
      expect(staleA.headers.get('etag')).toBeNull();
      expect(await assignment('host-b')).toMatchObject({
        status: 200,
        body: {
          entity: 'host-b',
          percent: 50,
          bucket: bucketOf(id, 'host-b'),
          stale: { reason: `store unreachable: no answer within ${ASSIGNMENT_READ_DEADLINE_MS} ms` },
        },
      });
      const t0 = Date.now();
      const read = await http(`${a.url}/rollouts`);
      const readMs = Date.now() - t0;
      expect(read.status).toBe(200);
      expect(read.headers.get('x-rollout-stale')).toBe('true');
      expect((read.body.stale as { reason: string }).reason).toBe(`store unreachable: no answer within ${READ_DEADLINE_MS} ms`);
      expect(read.headers.get('x-rollout-node-id')).toBe('n-silent');
      const never = await http(`${a.url}/cluster/events`);
      expect(never.status).toBe(503);
      expect(never.body.error).toBe(`store unreachable: no answer within ${READ_DEADLINE_MS} ms`);
      const health = await http(`${a.url}/cluster/health`);
      expect(health.body).toMatchObject({ status: 'degraded', store: `unreachable: no answer within ${READ_DEADLINE_MS} ms` });
      console.log(`[node] a read with the store silent answered in ${readMs} ms (deadline ${READ_DEADLINE_MS} ms)`);
    } finally {
      proxy.blackhole(false);
      for (const r of running.splice(0)) await r.close().catch(() => undefined);
      await proxy.stop();
    }
  }, 60_000);

  it('a PostgreSQL outage: the leader steps down, nobody is elected, reads answer from the last known state and say so; election resumes when it returns', async () => {
    const u = new URL(database.url);
    const proxy = await new FaultyProxy(u.hostname, Number(u.port)).start();
    u.port = String(proxy.port);
    try {
      const a = await startNode('n-out-a', u.toString());
      const b = await startNode('n-out-b', u.toString());
      const leader = await until('a leader', 5_000, () => [a, b].find((n) => n.node.state === 'leader'));
      const created = await http(`${leader.url}/rollouts`, 'POST', { spec }, { 'idempotency-key': randomUUID() });
      expect(created.status).toBe(201);
      for (const n of [a, b]) expect((await http(`${n.url}/rollouts`)).status).toBe(200);

      proxy.refuse(true);
      const downAt = Date.now();
      await until('the leader steps down', 10_000, () => a.node.state !== 'leader' && b.node.state !== 'leader');
      console.log(`[node] the leader stepped down ${Date.now() - downAt} ms into the outage (TTL ${fast.leaseTtlSeconds} s)`);
      // Both keep campaigning, and every campaign fails: nobody is elected while the store is away.
      const electors = [a, b].map((n) => n.node.plane.elector as LeaseElector);
      const before = electors.map((e) => ({ ...e.stats }));
      // A campaign is counted when it starts and its error when it ends: wait for both, never race them.
      await until('both have campaigned and failed twice more', 10_000, () =>
        electors.every((e, i) => e.stats.campaigns >= before[i]!.campaigns + 2 && e.stats.errors >= before[i]!.errors + 2),
      );
      expect([a.node.state, b.node.state]).not.toContain('leader');
      electors.forEach((e, i) => expect(e.stats.acquisitions).toBe(before[i]!.acquisitions));

      for (const n of [a, b]) {
        const read = await http(`${n.url}/rollouts`);
        expect(read.status).toBe(200);
        expect(read.headers.get('x-rollout-stale')).toBe('true');
        expect((read.body.stale as { reason: string }).reason).toMatch(/store unreachable/);
        expect((read.body.rollouts as { id: string }[]).map((r) => r.id)).toContain(created.body.id);
        const health = await http(`${n.url}/cluster/health`);
        expect(health.body.status).toBe('degraded');
        expect(String(health.body.store)).toMatch(/^unreachable/);
        const write = await http(`${n.url}/rollouts`, 'POST', { spec });
        expect(write.status).toBe(503);
        expect(write.body.error).toMatch(/no leader can be confirmed: store unreachable/);
      }

      proxy.refuse(false);
      await until('a leader again', 10_000, () => [a, b].find((n) => n.node.state === 'leader'));
      const fresh = await http(`${a.url}/rollouts`);
      expect(fresh.headers.get('x-rollout-stale')).toBeNull();
      // The step-down was recorded once the store was back (events wait for it).
      const db = new pg.Client({ connectionString: database.url });
      await db.connect();
      try {
        const { rows } = await until('leader_lost recorded', 5_000, async () => {
          const r = await db.query<{ node_id: string; reason: string }>(
            `SELECT node_id, event_data->>'reason' AS reason FROM cluster_events WHERE event_type = 'leader_lost' AND node_id = $1`,
            [leader.node.nodeId],
          );
          return r.rows.length ? r : null;
        });
        expect(rows.map((r) => r.reason)).toContain('expired');
      } finally {
        await db.end();
      }
    } finally {
      for (const r of running.splice(0)) await r.close().catch(() => undefined);
      await proxy.stop();
    }
  }, 60_000);
});
