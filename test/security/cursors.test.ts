/**
 * Crafted paging cursors: a `cursor` is request input, parsed by a schema
 * before any store sees it. Over HTTP against a real node on PostgreSQL, each
 * crafted cursor on each list route is a 400 naming `cursor`, the node still
 * reports its store reachable and logs no warning or error; cursors the API
 * handed out still page. DynamoDB's adapters (no node runs on them) are
 * checked at the store: each crafted cursor is a BadCursorError, never a
 * DynamoDB error, and real cursors still page.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/processes.js';
import { BadCursorError, MAX_CURSOR_LENGTH } from '../../shared/cursor.js';
import type { Logger } from '../../shared/log.js';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { nodeMetrics } from '../../shared/runtimes/node/metrics.js';
import { nodeApi } from '../../shared/runtimes/node/node-api.js';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { openBackend, uniqueName, type LeaseBackend } from '../support/backends.js';
import { databaseForFile } from '../support/database.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';

const db = databaseForFile('cursors');
const logged: string[] = [];
const logger: Logger = {
  debug() {},
  info() {},
  warn: (message, extra) => logged.push(`warn ${message} ${JSON.stringify(extra ?? {})}`),
  error: (message, extra) => logged.push(`error ${message} ${JSON.stringify(extra ?? {})}`),
};

let node: ControlPlaneNode;
let url: string;
let closeServer: () => Promise<void>;

beforeAll(async () => {
  const port = await freePort();
  // Heartbeats far apart: nothing but a request moves the reachability gauge while the tests run.
  node = await ControlPlaneNode.open(
    {
      nodeId: 'cursor-node',
      port,
      store: { kind: 'postgres', databaseUrl: db.url },
      elector: 'static',
      heartbeatIntervalSeconds: 600,
      leaseTtlSeconds: 1_200,
      scanIntervalSeconds: 1,
    },
    logger,
  );
  const server = await serveApi(nodeApi(node, nodeMetrics(node)), { port, logger });
  url = server.url;
  closeServer = () => server.close();
  await node.start();
}, 60_000);

afterAll(async () => {
  await closeServer?.();
  await node?.stop();
});

const encode = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const rawBytes = (b: number[]) => Buffer.from(b).toString('base64url');

/** Cursors no store hands out, each with why, for a store whose cursors are `{ at, id }` (lists) or `{ id }` (items). */
const COMMON: readonly (readonly [string, string])[] = [
  ['not base64url', '!!!!'],
  ['base64url padded with what it skips', `${encode({ id: 'a' })}%%`],
  ['not UTF-8', rawBytes([0x7b, 0x22, 0x69, 0x64, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
  ['not JSON', Buffer.from('{id:').toString('base64url')],
  ['JSON null', encode(null)],
  ['an array', encode([1, 'a'])],
  ['too long', 'A'.repeat(MAX_CURSOR_LENGTH + 4)],
];
const LIST: readonly (readonly [string, string])[] = [
  ...COMMON,
  ['at 1.5', encode({ at: 1.5, id: 'a' })],
  ['at 1e300', encode({ at: 1e300, id: 'a' })],
  ['at past safe integers', encode({ at: 2 ** 53, id: 'a' })],
  ['at before the epoch', encode({ at: -8.64e15, id: 'a' })],
  ['at as text', encode({ at: '1', id: 'a' })],
  ['a NUL in id', encode({ at: 1, id: 'a\u0000b' })],
  ['a lone surrogate in id', encode({ at: 1, id: '\uD800' })],
  ['an empty id', encode({ at: 1, id: '' })],
  ['an id over its bound', encode({ at: 1, id: 'é'.repeat(300) })],
  ['a field no cursor has', encode({ at: 1, id: 'a', __proto__x: { deep: [1] } })],
  ['no id', encode({ at: 1 })],
];
const ITEMS: readonly (readonly [string, string])[] = [
  ...COMMON,
  ['a NUL in id', encode({ id: 'a\u0000' })],
  ['a lone surrogate in id', encode({ id: 'a\uDC00' })],
  ['id a number', encode({ id: 1e300 })],
  ['an id over its bound', encode({ id: 'x'.repeat(600) })],
  ['a field no cursor has', encode({ id: 'a', at: 1 })],
];

async function get(path: string): Promise<{ status: number; body: { error?: string; next?: string | null } & Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`);
  return { status: res.status, body: (await res.json()) as { error?: string } };
}

async function storeReachable(): Promise<string | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return /^rollout_store_reachable(?:{[^}]*})? (\S+)$/m.exec(text)?.[1];
}

const spec = {
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds: 3_600 },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
};

describe('crafted cursors on a node on PostgreSQL, over HTTP', () => {
  const runId = uniqueName('cursor-run');

  beforeAll(async () => {
    for (const id of ['cursor-a', 'cursor-b', 'cursor-c']) {
      const res = await fetch(`${url}/rollouts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id, spec }) });
      expect(res.status).toBe(201);
    }
    const run = await fetch(`${url}/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: runId, items: [{ n: 1 }, { n: 2 }, { n: 3 }] }),
    });
    expect(run.status).toBe(201);
    for (const id of [`${runId}-b`, `${runId}-c`]) {
      const more = await fetch(`${url}/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id, items: [{ n: 1 }] }),
      });
      expect(more.status).toBe(201);
    }
  }, 60_000);

  const routes = [
    { name: 'GET /rollouts', path: () => '/rollouts?limit=1&cursor=', cursors: LIST },
    { name: 'GET /runs', path: () => '/runs?limit=1&cursor=', cursors: LIST },
    { name: 'GET /runs/{id}/items', path: () => `/runs/${runId}/items?limit=1&cursor=`, cursors: ITEMS },
  ];

  it.each(routes)(
    '$name: each crafted cursor is a 400 naming cursor; the store stays reachable and nothing is logged',
    async ({ path, cursors }) => {
      const before = logged.length;
      const answered: { why: string; status: number; error: string | undefined; storeReachable: string | undefined }[] = [];
      for (const [why, cursor] of cursors) {
        const res = await get(`${path()}${encodeURIComponent(cursor)}`);
        // Read after each: the next request that reaches the store would set the gauge back.
        answered.push({ why, status: res.status, error: res.body.error, storeReachable: await storeReachable() });
      }
      // Together: a failure shows every cursor let through, with the gauge after it, and the log lines.
      const wrong = answered.filter((a) => a.status !== 400 || !/^cursor: /.test(a.error ?? '') || a.storeReachable !== '1');
      expect({ wrong, logged: logged.slice(before) }).toEqual({ wrong: [], logged: [] });
    },
    60_000,
  );

  it.each(routes)(
    '$name: the cursors it hands out still page',
    async ({ path }) => {
      const first = await get(path().replace('&cursor=', ''));
      expect(first.status).toBe(200);
      expect(first.body.next).toEqual(expect.any(String));
      const second = await get(`${path()}${encodeURIComponent(first.body.next!)}`);
      expect(second.status).toBe(200);
      expect(JSON.stringify(second.body)).not.toBe(JSON.stringify(first.body));
    },
    60_000,
  );
});

/** The cursors `read` did not refuse with a BadCursorError, each with what it did instead. */
async function notRefused(
  cursors: readonly (readonly [string, string])[],
  read: (cursor: string) => Promise<unknown>,
): Promise<{ why: string; got: string }[]> {
  const out: { why: string; got: string }[] = [];
  for (const [why, cursor] of cursors) {
    const err = await read(cursor).then(
      () => null,
      (e: unknown) => e,
    );
    if (!(err instanceof BadCursorError))
      out.push({ why, got: err === null ? 'a page' : err instanceof Error ? `${err.name}: ${err.message}` : 'a non-Error' });
  }
  return out;
}

describe('crafted cursors on DynamoDB, at the store', () => {
  let backend: LeaseBackend;
  const runId = uniqueName('cursor-run');

  beforeAll(async () => {
    backend = await openBackend('dynamodb');
    const now = Date.now();
    for (const [i, id] of ['cursor-a', 'cursor-b', 'cursor-c'].entries()) await backend.rollouts.create(id, parseRolloutSpec(spec), now + i, 'test');
    await backend.ledger.createRun(runId, {}, now, {});
    await backend.ledger.enqueue(runId, [{ n: 1 }, { n: 2 }, { n: 3 }], now);
    await backend.ledger.createRun(`${runId}-b`, {}, now + 1, {});
  }, 60_000);

  afterAll(async () => {
    await backend?.close();
  });

  const listCursors: readonly (readonly [string, string])[] = [
    ...COMMON,
    ['an empty sort key', encode({ sk: '' })],
    ['a sort key not of a list', encode({ sk: 'ROLLOUT' })],
    ['a NUL in the sort key', encode({ sk: '000000000000001#a\u0000' })],
    ['a lone surrogate in the sort key', encode({ sk: '000000000000001#\uD800' })],
    ['a sort key over 1 KB', encode({ sk: `000000000000001#${'é'.repeat(600)}` })],
    ['a field no cursor has', encode({ sk: '000000000000001#a', pk: 'RUN#x' })],
  ];

  it.each([
    {
      name: 'rollout list',
      read: (cursor: string) => backend.rollouts.list({ limit: 1, cursor }),
      first: async () => (await backend.rollouts.list({ limit: 1 })).next,
    },
    {
      name: 'run list',
      read: (cursor: string) => backend.ledger.listRuns({ limit: 1, cursor }),
      first: async () => (await backend.ledger.listRuns({ limit: 1 })).next,
    },
  ])(
    '$name: each crafted cursor is a BadCursorError; one it handed out still pages',
    async ({ read, first }) => {
      expect(await notRefused(listCursors, read)).toEqual([]);
      const next = await first();
      expect(next).toEqual(expect.any(String));
      await expect(read(next!)).resolves.toBeDefined();
    },
    60_000,
  );

  it('run items: each crafted cursor, a LastEvaluatedKey of another shape included, is a BadCursorError', async () => {
    // A cursor handed out for this run: its partition key is the one a crafted key must match to get past the run check.
    const page = await backend.ledger.items(runId, { limit: 1 });
    const real = JSON.parse(Buffer.from(page.next!, 'base64url').toString('utf8')) as { p: number; k: { pk: string; sk: string } | null };
    const pk = real.k?.pk ?? `RUN#${runId}`;
    const crafted: readonly (readonly [string, string])[] = [
      ...COMMON,
      ['p 1.5', encode({ p: 1.5, k: null })],
      ['p 1e300', encode({ p: 1e300, k: null })],
      ['p past the partitions', encode({ p: 10_000, k: null })],
      ['p negative', encode({ p: -1, k: null })],
      ['a key with another attribute', encode({ p: real.p, k: { pk, sk: 'ITEM#a', state: 'pending' } })],
      ['a key with a nested attribute', encode({ p: real.p, k: { pk, sk: 'ITEM#a', x: { M: { S: 'x' } } } })],
      ['a key with numbers for strings', encode({ p: real.p, k: { pk: 1, sk: 2 } })],
      ['a key missing its sort key', encode({ p: real.p, k: { pk } })],
      ['an empty sort key', encode({ p: real.p, k: { pk, sk: '' } })],
      ['a sort key not of an item', encode({ p: real.p, k: { pk, sk: 'RUN' } })],
      ['a NUL in the sort key', encode({ p: real.p, k: { pk, sk: 'ITEM#\u0000' } })],
      ['a sort key over 1 KB', encode({ p: real.p, k: { pk, sk: `ITEM#${'é'.repeat(600)}` } })],
      ['a key of another run', encode({ p: real.p, k: { pk: `RUN#${runId}-b`, sk: 'ITEM#a' } })],
      ['k an array', encode({ p: real.p, k: [pk, 'ITEM#a'] })],
    ];
    expect(await notRefused(crafted, (cursor) => backend.ledger.items(runId, { limit: 1, cursor }))).toEqual([]);
    // The one it handed out still pages.
    expect((await backend.ledger.items(runId, { limit: 1, cursor: page.next! })).items).toHaveLength(1);
  }, 60_000);
});
