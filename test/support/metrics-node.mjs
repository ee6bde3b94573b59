// A node on PostgreSQL served over HTTP, as `rollout serve` serves it but with its /metrics
// registry chosen by the caller: the promotion bench's node-metrics part runs one per arm.
// Plain JavaScript over the built package (dist/, `npm run build` first): under the TypeScript
// loader the node's own figures would carry the loader's helpers.
//
//   node test/support/metrics-node.mjs '{"databaseUrl":"…","port":8123,"metrics":true}'
//
// Prints one JSON line once serving ({"url"}); when stdin closes, stops and prints another
// ({"scrapeStoreReads"}: how often a /metrics answer read the store, to check the cache).
import process from 'node:process';
import { URL } from 'node:url';
import { Registry } from 'prom-client';

const config = JSON.parse(process.argv[2] ?? '{}');
const dist = new URL('../../dist/shared/runtimes/node/', import.meta.url);
const { ControlPlaneNode } = await import(new URL('node.js', dist).href);
const { nodeApi } = await import(new URL('node-api.js', dist).href);
const { nodeMetrics } = await import(new URL('metrics.js', dist).href);
const { serveApi } = await import(new URL('http.js', dist).href);

const node = await ControlPlaneNode.open({
  nodeId: config.metrics ? 'with-metrics' : 'without-metrics',
  port: config.port,
  store: { kind: 'postgres', databaseUrl: config.databaseUrl },
  elector: 'static',
  // One client posts every event: a per-address limit would answer 429 instead of measuring.
  rateLimit: { perAddress: 0, perCredential: 0 },
});
const handle = nodeApi(node, config.metrics ? nodeMetrics(node) : new Registry());

// Store reads made while a scrape is answered: at most one a second however often it is scraped.
let scraping = 0;
let scrapeStoreReads = 0;
const store = node.plane.engine.store;
const loadRunning = store.loadRunning.bind(store);
store.loadRunning = (...a) => {
  if (scraping) scrapeStoreReads++;
  return loadRunning(...a);
};
const served = async (req) => {
  if (req.path !== '/metrics') return handle(req);
  scraping++;
  try {
    return await handle(req);
  } finally {
    scraping--;
  }
};

const server = await serveApi(served, { port: config.port });
await node.start();
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);

process.stdin.resume();
process.stdin.on('end', () => {
  void (async () => {
    await server.close();
    await node.stop();
    process.stdout.write(`${JSON.stringify({ scrapeStoreReads })}\n`);
    process.exit(0);
  })();
});
