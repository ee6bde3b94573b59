/**
 * The wake-up's listening connection can drop (a restart, a failover, a cut
 * link). NOTIFYs sent while it is down are lost for good, so after it comes
 * back every waiter must look again and every channel must hear that it may
 * have missed something: a follower that missed "the leader resigned" would
 * otherwise wait for its next retry.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgNotifyWake } from '../../shared/adapters/postgres/wake.js';
import { until } from '../support/gate.js';
import { FaultyProxy } from '../support/tcp-proxy.js';

describe('the wake-up after its connection was lost', () => {
  let proxy: FaultyProxy;
  let wake: PgNotifyWake;
  let direct: pg.Client;
  const heard: string[] = [];

  beforeAll(async () => {
    const url = new URL(process.env.DATABASE_URL!);
    proxy = await new FaultyProxy(url.hostname, Number(url.port)).start();
    direct = new pg.Client({ connectionString: url.toString() });
    await direct.connect();
    url.port = String(proxy.port);
    wake = await PgNotifyWake.open({ connectionString: url.toString() }, undefined, { test_leader: (p) => heard.push(p) });
  });
  afterAll(async () => {
    await wake?.close();
    await direct?.end();
    await proxy?.stop();
  });

  it('tells every channel and every waiter once it is back, since what was sent meanwhile is lost', async () => {
    await direct.query(`SELECT pg_notify('test_leader', 'node-1')`);
    await until('a notice over the live connection', () => heard.includes('node-1'));

    const armed = wake.arm('run-1');
    let released = false;
    const waiting = armed.wait(3_600_000).then(() => (released = true));
    proxy.refuse(true);
    await until('the wake-up saw its connection drop', () =>
      wake.publish('test_leader', 'x').then(
        () => false,
        (err: Error) => /down/.test(err.message),
      ),
    );
    // Sent while the listening connection is down: never delivered.
    await direct.query(`SELECT pg_notify('test_leader', 'node-2')`);
    expect(released).toBe(false);
    proxy.refuse(false);

    await until('the channel hears it may have missed a notice', () => heard.includes(''), 30_000);
    await waiting;
    expect(released).toBe(true);
    expect(heard).not.toContain('node-2');

    // Listening again: a notice sent now arrives, and publish goes over the connection.
    await wake.publish('test_leader', 'node-3');
    await until('a notice after the reconnect', () => heard.includes('node-3'));
    await expect(wake.publish('not_a_channel', 'x')).rejects.toThrow(/not a channel/);
  });
});
