/** An elector of the repository's own (docs/concepts/leases-and-fencing.md#electors): imported from a checkout, not from the package. */
// #region elector
import { hostname } from 'node:os';
import { LeaseElector } from './shared/lease/elector.js';
import { PostgresLeaseStore } from './shared/adapters/postgres/lease-store.js';
import { withFence } from './shared/adapters/postgres/fence.js';
import { connectPostgres } from './shared/adapters/postgres/connect.js';

const db = await connectPostgres(); // DATABASE_URL; migrates the schema
const elector = new LeaseElector(new PostgresLeaseStore(db.sql), {
  name: 'promotion_leader',
  holderId: `${hostname()}-${process.pid}`,  // distinct per process
  ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, // the defaults
  onStartedLeading: (token) => console.info('leading', token),
  onStoppedLeading: (token, reason) => console.warn('stopped leading', token, reason), // fenced | expired | lost | resigned | stopped
});
elector.start();

// Every effectful write carries the token; the store checks it atomically.
const token = elector.token();             // null unless leading by our own clock
if (token) {
  await withFence(db.sql, token, (tx) => tx.query('UPDATE stage_status SET …'));
}                                          // throws FencedError if we were deposed
await elector.stop();                      // resigns: a follower takes over at once
// #endregion elector
