/**
 * A cluster event the store refused (it was down, the connection dropped) is
 * written once the store answers again, by the member's own retry: the
 * heartbeat that would otherwise flush it can be minutes away.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresMembershipStore } from '../../shared/adapters/postgres/membership-store.js';
import type { PostgresHandle } from '../../shared/adapters/postgres/connect.js';
import { PostgresLeaseStore } from '../../shared/adapters/postgres/lease-store.js';
import { ClusterMember } from '../../shared/cluster/member.js';
import { Membership } from '../../shared/cluster/membership.js';
import { silentLogger } from '../../shared/log.js';
import { proxiedPostgresSchema } from '../support/backends.js';
import { until } from '../support/gate.js';
import type { FaultyProxy } from '../support/tcp-proxy.js';

describe('cluster events while the store is away', () => {
  let setup: Awaited<ReturnType<typeof proxiedPostgresSchema>>;
  let schema: typeof setup.schema;
  let proxy: FaultyProxy;
  let db: PostgresHandle;

  beforeAll(async () => {
    setup = await proxiedPostgresSchema(2);
    ({ schema, proxy, db } = setup);
  });
  afterAll(async () => {
    await setup?.close();
  });

  it('an event recorded during an outage is written when the store is back, with no heartbeat', async () => {
    const warned: string[] = [];
    const member = new ClusterMember({
      self: { nodeId: 'n-events', hostname: 'n-events', port: 0, apiUrl: 'http://127.0.0.1:0' },
      membership: new Membership(new PostgresMembershipStore(db.sql), { staleAfterMs: 30_000, deadAfterMs: 180_000 }),
      leases: new PostgresLeaseStore(db.sql),
      leaseName: 'promotion_leader',
      eventRetentionMs: 86_400_000,
      logger: { ...silentLogger, warn: (m) => void warned.push(m) },
    });
    const events = async () =>
      (
        await schema.sql.query<{ event_type: string; term: string }>(
          `SELECT event_type, event_data->>'term' AS term FROM cluster_events WHERE node_id = 'n-events' ORDER BY id`,
        )
      ).rows;

    proxy.refuse(true);
    member.stop(); // no heartbeat after the step-down below: only the retry can write the events
    member.callbacks().onStartedLeading!({ name: 'promotion_leader', holder: 'n-events', epoch: 7 });
    member.callbacks().onStoppedLeading!({ name: 'promotion_leader', holder: 'n-events', epoch: 7 }, 'expired');
    // Both writers refused (the flush and the heartbeat a new leader sends) before the store comes back.
    await until('the events were refused', () => warned.includes('cluster events not written; retrying') && member.stats.heartbeatFailures === 1);
    expect(await events()).toEqual([]);
    proxy.refuse(false);

    await until('the events are written', async () => (await events()).length === 2, 30_000);
    expect(await events()).toEqual([
      { event_type: 'leader_elected', term: '7' },
      { event_type: 'leader_lost', term: '7' },
    ]);
    await member.leave();
  });
});
