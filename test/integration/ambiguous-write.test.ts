/**
 * Lost replies: the store commits the write, the reply never arrives. A proxy
 * in front of the real server swallows exactly that reply and cuts the
 * connection. The elector must settle the outcome by re-reading the row and
 * report the true state — never assume the write failed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseElector } from '../../shared/lease/elector.js';
import type { LeaseStore } from '../../shared/lease/store.js';
import { dynamoDocumentClient } from '../../shared/adapters/dynamodb/connect.js';
import { DynamoLeaseStore } from '../../shared/adapters/dynamodb/lease-store.js';
import { connectPostgres } from '../../shared/adapters/postgres/connect.js';
import { PostgresLeaseStore } from '../../shared/adapters/postgres/lease-store.js';
import { dynamoTable, postgresSchema, uniqueName } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { FaultyProxy } from '../support/tcp-proxy.js';

const TIMINGS = { ttlMs: 3_000, renewIntervalMs: 1_000, retryIntervalMs: 500, clockSkewMs: 100 };

interface Rig {
  direct: LeaseStore;
  viaProxy: LeaseStore;
  proxy: FaultyProxy;
}

function scenarios(label: string, rig: () => Rig) {
  describe(label, () => {
    it('a steal whose reply is lost: the contender finds it holds epoch + 1', async () => {
      const { direct, viaProxy, proxy } = rig();
      const name = uniqueName('lost');
      const clock = new ManualClock();
      const a = new LeaseElector(direct, { name, holderId: 'a', clock, ...TIMINGS });
      const b = new LeaseElector(viaProxy, { name, holderId: 'b', clock, ...TIMINGS });
      await a.campaign();
      expect((await b.campaign()).leader).toBe(false); // b has seen a's row

      clock.advance(TIMINGS.ttlMs + TIMINGS.clockSkewMs);
      const dropped = proxy.dropped;
      proxy.dropNextReply();
      const result = await b.campaign();

      expect(proxy.dropped).toBe(dropped + 1);
      expect(result.leader).toBe(true);
      expect(b.token()).toEqual({ name, holder: 'b', epoch: 1 });
      expect(await direct.read(name)).toMatchObject({ holder: 'b', epoch: 1 });
    });

    it('a renewal whose reply is lost: the leader stays leader at the same epoch', async () => {
      const { direct, viaProxy, proxy } = rig();
      const name = uniqueName('lost');
      const clock = new ManualClock();
      const a = new LeaseElector(viaProxy, { name, holderId: 'a', clock, ...TIMINGS });
      await a.campaign();
      clock.advance(TIMINGS.renewIntervalMs);
      proxy.dropNextReply();
      expect((await a.campaign()).leader).toBe(true);
      const row = await direct.read(name);
      expect(row).toMatchObject({ holder: 'a', epoch: 0, version: 1, expiresAt: clock.now() + TIMINGS.ttlMs });
      expect(a.lastObserved()).toMatchObject({ version: 1 });
    });

    it('a resignation whose reply is lost still releases, and the next holder gets epoch + 1', async () => {
      const { direct, viaProxy, proxy } = rig();
      const name = uniqueName('lost');
      const clock = new ManualClock();
      const a = new LeaseElector(viaProxy, { name, holderId: 'a', clock, ...TIMINGS });
      await a.campaign();
      proxy.dropNextReply();
      await a.resign();
      expect(a.token()).toBeNull();
      expect(await direct.read(name)).toMatchObject({ holder: null, epoch: 0 });
      const c = new LeaseElector(direct, { name, holderId: 'c', clock, ...TIMINGS });
      await c.campaign();
      expect(c.token()?.epoch).toBe(1);
    });
  });
}

describe('lost replies', () => {
  const rigs: Record<string, Rig> = {};
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    // PostgreSQL through the proxy, same schema as the direct pool.
    const db = await postgresSchema(4);
    closers.push(() => db.close());
    const url = new URL(db.url);
    const pgProxy = await new FaultyProxy(url.hostname, Number(url.port)).start();
    closers.push(() => pgProxy.stop());
    url.port = String(pgProxy.port);
    const viaPg = await connectPostgres({ connectionString: url.toString(), max: 2, options: `-c search_path=${db.schema}` });
    closers.push(() => viaPg.close());
    rigs.postgres = { direct: new PostgresLeaseStore(db.sql), viaProxy: new PostgresLeaseStore(viaPg.sql), proxy: pgProxy };

    // DynamoDB through the proxy; SDK retries left on (a retry meets our own committed write).
    const t = await dynamoTable();
    closers.push(() => t.close());
    const endpoint = new URL(process.env.AWS_ENDPOINT_URL_DYNAMODB ?? process.env.AWS_ENDPOINT_URL!);
    const ddbProxy = await new FaultyProxy(endpoint.hostname, Number(endpoint.port)).start();
    closers.push(() => ddbProxy.stop());
    const proxied = (maxAttempts: number) => dynamoDocumentClient({ endpoint: `http://127.0.0.1:${ddbProxy.port}`, maxAttempts });
    rigs.dynamodb = { direct: new DynamoLeaseStore(t.doc, t.table), viaProxy: new DynamoLeaseStore(proxied(3), t.table), proxy: ddbProxy };
    // …and with retries off, so the elector's own re-read settles it.
    rigs.dynamodbNoRetry = { direct: new DynamoLeaseStore(t.doc, t.table), viaProxy: new DynamoLeaseStore(proxied(1), t.table), proxy: ddbProxy };
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  scenarios('on PostgreSQL', () => rigs.postgres!);
  scenarios('on DynamoDB (SDK retries)', () => rigs.dynamodb!);
  scenarios('on DynamoDB (no SDK retries)', () => rigs.dynamodbNoRetry!);
});
