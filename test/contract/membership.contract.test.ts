/**
 * Cluster membership (cluster_nodes and cluster_events) on
 * PostgreSQL and PGlite: join, heartbeat, stale → unhealthy, dead → removed,
 * graceful leave, the events it records.
 */
import { beforeAll, expect, it } from 'vitest';
import { Membership } from '../../shared/cluster/membership.js';
import { PostgresMembershipStore } from '../../shared/adapters/postgres/membership-store.js';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const node = (id: string, port: number) => ({ nodeId: id, hostname: 'localhost', port, apiUrl: `http://127.0.0.1:${port}` });

forEachBackend('cluster membership on %s', { only: ['postgres', 'pglite'] }, (backend) => {
  const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
  let m: Membership;
  beforeAll(() => {
    m = new Membership(new PostgresMembershipStore(backend.sql!), { staleAfterMs: 30_000, deadAfterMs: 180_000, clock });
  });

  it('join records node_joined once; heartbeats carry the reported state and term', async () => {
    await m.join(node('n1', 8001));
    await m.join(node('n1', 8001)); // a restart: same row, no second event
    await m.join(node('n2', 8002));
    await m.join(node('n3', 8003));
    clock.advance(10_000);
    await m.heartbeat(node('n1', 8001), 'leader', 4);
    const nodes = await m.nodes();
    expect(nodes.map((n) => [n.nodeId, n.state, n.term, n.isHealthy])).toEqual([
      ['n1', 'leader', 4, true],
      ['n2', 'follower', 0, true],
      ['n3', 'follower', 0, true],
    ]);
    expect(nodes[0]!.lastHeartbeat).toBe(clock.now());
    expect(
      (await m.events())
        .filter((e) => e.type === 'node_joined')
        .map((e) => e.nodeId)
        .sort(),
    ).toEqual(['n1', 'n2', 'n3']);
  });

  it('the monitor: silent nodes turn unhealthy, then are removed with node_left; no healthy majority records cluster_degraded', async () => {
    clock.advance(25_000); // n1 heartbeat 25 s ago, n2 and n3 35 s ago
    expect(await m.monitor('n1')).toEqual({ stale: ['n2', 'n3'], removed: [], degraded: true });
    expect((await m.nodes()).map((n) => n.isHealthy)).toEqual([true, false, false]);
    const degraded = (await m.events()).find((e) => e.type === 'cluster_degraded')!;
    expect(degraded).toMatchObject({ nodeId: 'n1', data: { healthy: 1, total: 3, stale: ['n2', 'n3'] } });
    // n2 comes back: healthy again.
    await m.heartbeat(node('n2', 8002), 'follower', 4);
    expect((await m.nodes()).find((n) => n.nodeId === 'n2')!.isHealthy).toBe(true);
    clock.advance(150_000); // n3 silent for 185 s: dead; n1 and n2 keep heartbeating
    await m.heartbeat(node('n1', 8001), 'leader', 4);
    await m.heartbeat(node('n2', 8002), 'follower', 4);
    expect(await m.monitor('n1')).toEqual({ stale: [], removed: ['n3'], degraded: false });
    expect((await m.nodes()).map((n) => n.nodeId)).toEqual(['n1', 'n2']);
    expect((await m.events(1))[0]).toMatchObject({ type: 'node_left', nodeId: 'n3', data: { reason: 'dead', detectedBy: 'n1' } });
  });

  it('a removed node that heartbeats again rejoins; a graceful leave removes it with its reason', async () => {
    await m.heartbeat(node('n3', 8003), 'follower', 4);
    expect((await m.nodes()).map((n) => n.nodeId)).toEqual(['n1', 'n2', 'n3']);
    expect((await m.events(3)).map((e) => e.type)).toContain('node_joined');
    await m.leave('n2');
    expect((await m.nodes()).map((n) => n.nodeId)).toEqual(['n1', 'n3']);
    expect((await m.events(1))[0]).toMatchObject({ type: 'node_left', nodeId: 'n2', data: { reason: 'shutdown' } });
    await m.leave('n2'); // already gone: nothing more recorded
    expect((await m.events(1))[0]!.data).toEqual({ reason: 'shutdown' });
    await expect(m.join(node(' ', 1))).rejects.toThrow(/nodeId: must not be empty/);
    expect(() => new Membership(new PostgresMembershipStore(backend.sql!), { staleAfterMs: 10, deadAfterMs: 5 })).toThrow(/must exceed/);
  });

  it('the cluster log keeps its retention: older events are pruned, newer ones kept', async () => {
    await m.record('election_started', 'n1', { lastTerm: 7 });
    clock.advance(60_000);
    await m.record('leader_elected', 'n1', { term: 8 });
    await m.pruneEvents(30_000);
    const left = (await m.events(500)).map((e) => e.data);
    expect(left).toContainEqual({ term: 8 });
    expect(left).not.toContainEqual({ lastTerm: 7 });
  });
});
