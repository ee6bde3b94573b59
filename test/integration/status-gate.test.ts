/**
 * `rollout rollouts status` as a pipeline's gate when the control plane does
 * not answer: a refused connection, a name that does not resolve or a
 * refused credential ends it at once with exit 1 and the reason on stderr;
 * a node that goes away after answering is reported on stderr as it happens
 * and tried again until --timeout (exit 3).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/processes.js';
import { rollout } from '../support/cli.js';
import { databaseForFile } from '../support/database.js';
import { servedNode, type ServedNode } from '../support/gated-node.js';

const db = databaseForFile('status_gate');
let served: ServedNode | undefined;
let refusing: Server;
let refusingUrl: string;

beforeAll(async () => {
  served = await servedNode({ nodeId: 'status-node', databaseUrl: db.url, origins: [] });
  // A control plane that refuses the pipeline's credential.
  refusing = createServer((_, res) => res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unknown token"}'));
  await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', r));
  refusingUrl = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`;
}, 90_000);

afterAll(async () => {
  await served?.close();
  await new Promise((r) => refusing.close(r));
});

describe('rollout rollouts status against a control plane that does not answer', () => {
  it('exits 1 at once, saying why, on a refused connection, an unknown host or a refused credential', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    for (const [url, said] of [
      [closed, 'ECONNREFUSED'],
      ['http://no-such-host.invalid', 'cannot reach http://no-such-host.invalid'],
      [refusingUrl, '401'],
    ] as const) {
      // No --timeout: before, this waited for good, printing nothing.
      const r = await rollout(['rollouts', 'status', 'ro-x', '--url', url, '--poll', '500ms']);
      expect(r.code, `${url}: ${r.err}`).toBe(1);
      expect(r.out).toBe('');
      expect(r.err).toContain(said);
    }
  }, 120_000);

  it('reports a node that goes away on stderr as it happens, and tries again until --timeout (exit 3)', async () => {
    const res = await fetch(`${served!.url}/rollouts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        id: 'ro-long',
        spec: { target: { service: 'checkout', version: 'v2' }, stages: [{ name: 'all', percent: 100, bakeSeconds: 3_600 }] },
      }),
    });
    expect(res.status).toBe(201);
    const url = served!.url;
    // Once the gate has read the rollout (its first progress line), the node goes away.
    const r = await rollout(['rollouts', 'status', 'ro-long', '--url', url, '--poll', '500ms', '--timeout', '20s'], {}, async (stderr) => {
      if (served && stderr.includes('ro-long  running')) {
        const s = served;
        served = undefined;
        await s.close();
      }
    });
    expect(r.code, r.err).toBe(3);
    expect(r.out).toMatch(/^ro-long {2}running: not ended after 20 s\n$/);
    expect(r.err).toMatch(/ro-long {2}running/);
    expect(r.err).toMatch(
      /cannot read rollout ro-long: cannot reach http:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED.* \(trying again every 0\.5 s, for up to 20 s\)/,
    );
  }, 120_000);
});
