/** A worker of one run (loop.ts) and what its users and models read: its options, counters and timings. */
export { RUN_RECORD_TTL_MS } from './claim.js';
export { extensionDue, HEARTBEAT_ROUNDS, heartbeatDue } from './heartbeat.js';
export { backoffMs, Worker } from './loop.js';
export type { CoordinatorClient, WorkerOptions, WorkerStats } from './options.js';
export { stealBackoffMs } from './steal.js';
