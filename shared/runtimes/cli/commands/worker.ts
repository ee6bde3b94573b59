import type { CommandSpec } from '../command-spec.js';
import { stderrLogger } from '../io.js';
import { duration, days, int } from '../parsers.js';
import { DEFAULT_RETENTION } from '../../../retention.js';
import { runWorkerCommand, type WorkerCommandOptions, type WorkerSummary } from '../../worker/worker-command.js';

function summaryLine(s: WorkerSummary): string {
  const drain = s.drainMs === null ? '' : `, drained ${s.nacked} items in ${s.drainMs} ms${s.withinDeadline ? '' : ' (past the deadline)'}`;
  return `worker ${s.workerId} on ${s.instanceId}${s.runs.length > 1 ? ` (${s.runs.length} runs)` : ''}: ${s.exit}; done ${s.done}, stolen ${s.stolen}, lost ${s.lost}, failed attempts ${s.failedAttempts}${drain}`;
}

/** `rollout worker`: a worker of one or more work runs. */
export const workerCommand: CommandSpec = {
  name: 'worker',
  description:
    'Run a worker of one or more work runs: pull items, claim them in the ledger, run them (on a backend, or your --module), record the results; drain on a spot notice.',
  options: [
    { flags: '--run <id...>', description: 'the run to work on (several: --run a --run b, or --run a b)', required: true },
    {
      flags: '--url <url>',
      // Not ROLLOUT_URL: a shell set up for the CLI would turn every worker started from it into a worker of that node.
      description: "a node's API URL (npm start, a cluster): the worker claims and records through the node, with no store credentials (--store node)",
    },
    {
      flags: '--store <kind>',
      description: 'where the ledger is (default: node with --url, postgres with --database-url, else dynamodb)',
      choices: ['postgres', 'dynamodb', 'node'],
      env: 'ROLLOUT_STORE',
    },
    { flags: '--database-url <url>', description: 'PostgreSQL connection string', env: 'DATABASE_URL' },
    { flags: '--table <name>', description: 'DynamoDB table', env: 'ROLLOUT_TABLE' },
    { flags: '--queue <ledger|url>', description: '"ledger" (PostgreSQL: the ledger is the queue) or an SQS queue URL', env: 'ROLLOUT_WORK_QUEUE_URL' },
    { flags: '--coordinator <none|lambda:name|url>', description: 'where an idle worker asks for work (steals)', env: 'ROLLOUT_COORDINATOR' },
    {
      flags: '--token <token>',
      description: 'a bearer token with the worker scope, for a node with authentication on (its coordinator, or all of it with --url)',
      env: 'ROLLOUT_TOKEN',
    },
    { flags: '--ca-file <pem>', description: "the CA a node's HTTPS certificate chains to", env: 'ROLLOUT_CA_FILE' },
    { flags: '--backend <kind>', description: 'how items run (default mock; module with --module)', choices: ['mock', 'http', 'module'] },
    {
      flags: '--module <file>',
      description:
        'your own JavaScript module: its default export (or `handler`), async (item, { signal, heartbeat, progress, attempt, runId }) => result, runs each item',
    },
    {
      flags: '--item-timeout <duration|none>',
      description: 'how long one attempt of an item may run before it fails as timed out (90s, 30m, 2h; default none: as long as it takes, kept by heartbeats)',
      parser: (v) => (v === 'none' ? null : duration('--item-timeout')(v)),
    },
    {
      flags: '--stall <duration>',
      description: 'fail an attempt whose --module handler has not called heartbeat() or progress() for this long',
      parser: (v) => duration('--stall')(v),
    },
    { flags: '--backend-url <url>', description: 'http backend: POST each payload here; the response body is the result' },
    {
      flags: '--backend-timeout <duration|none>',
      description: 'http backend: how long one call may take (90s, 30m, 2h), or none: as long as it takes, the item kept by heartbeats (default 60s)',
      parser: (v) => (v === 'none' ? null : duration('--backend-timeout')(v)),
    },
    { flags: '--mock-duration-ms <ms>', description: 'mock backend: time per item', parser: int('--mock-duration-ms'), default: 0 },
    { flags: '--mock-failure-rate <0..1>', description: 'mock backend: share of items that always fail (poison)', parser: (v) => Number(v), default: 0 },
    { flags: '--worker-id <id>', description: 'this worker (default: host-pid)', env: 'ROLLOUT_WORKER_ID' },
    {
      flags: '--instance-id <id|auto>',
      description: 'the machine, as spot notices name it; auto reads the instance metadata (aws, gcp) or the host name',
      default: 'auto',
    },
    {
      flags: '--provider <kind>',
      description: 'where it runs: which preemption notices to watch and which drain deadline applies',
      choices: ['aws', 'gcp', 'local'],
      default: 'local',
    },
    { flags: '--metadata-endpoint <url>', description: 'instance metadata base URL (default 169.254.169.254 on AWS, metadata.google.internal on GCP)' },
    { flags: '--heartbeat-ms <ms>', description: 'item heartbeat, visibility extension and registry heartbeat', parser: int('--heartbeat-ms'), default: 5_000 },
    { flags: '--visibility-seconds <s>', description: 'SQS visibility kept ahead while an item is held', parser: int('--visibility-seconds'), default: 30 },
    { flags: '--wait-seconds <s>', description: 'long-poll wait, 0–20', parser: int('--wait-seconds'), default: 20 },
    { flags: '--batch <n>', description: 'messages received at once', parser: int('--batch'), default: 10 },
    {
      flags: '--chunk-budget-ms <ms>',
      description: 'how long a chunk of started (unstealable) items may take; items are started a chunk at a time, sized from their measured duration',
      parser: int('--chunk-budget-ms'),
      default: 100,
    },
    { flags: '--exit-when-done', description: 'stop once the run has nothing pending or running', default: false },
    {
      flags: '--retain-runs <days>',
      description: 'DynamoDB: an item this worker finishes is deleted (TTL) this many days after',
      parser: days('--retain-runs'),
      env: 'ROLLOUT_RETAIN_RUNS_DAYS',
      default: DEFAULT_RETENTION.runDays,
    },
    {
      flags: '--metrics-port <port>',
      description: 'serve Prometheus metrics at /metrics on this port (0: any free one, logged)',
      parser: int('--metrics-port'),
    },
    { flags: '--metrics-host <host>', description: 'the address --metrics-port listens on', default: '127.0.0.1' },
    { flags: '--json', description: 'logs and the summary as JSON lines', default: false },
  ],
  action: async (opts: Record<string, unknown>) => {
    const json = opts.json === true;
    const runs = Array.isArray(opts.run) ? (opts.run as string[]) : [];
    // A worker of one run (the usual case) marks every line with it; a worker of several names the run where it matters.
    const logger = stderrLogger(json, 'rollout-worker', runs.length === 1 ? { runId: runs[0] } : {});
    let drain = () => undefined as void;
    let signals = 0;
    // SIGTERM is how ECS announces a Fargate Spot interruption (and how an orchestrator stops a task): drain.
    // SIGINT drains too; a second signal exits at once (held items return through the failure scan).
    const onSignal = (sig: NodeJS.Signals) => {
      if (++signals > 1) process.exit(130);
      logger.warn(`${sig}: draining`);
      drain();
    };
    process.on('SIGTERM', onSignal).on('SIGINT', onSignal);
    const { json: _json, store, queue, backendTimeout, itemTimeout, stall, run, backend, retainRuns, ...flags } = opts;
    const input = {
      ...flags,
      retainRunDays: retainRuns,
      runs: run,
      store: store ?? (opts.url ? 'node' : opts.databaseUrl ? 'postgres' : 'dynamodb'),
      queue: queue ?? 'ledger',
      backend: backend ?? (opts.module ? 'module' : 'mock'),
      ...(backendTimeout !== undefined ? { backendTimeoutMs: backendTimeout } : {}),
      ...(itemTimeout !== undefined ? { itemTimeoutMs: itemTimeout } : {}),
      ...(stall !== undefined ? { stallMs: stall } : {}),
    };
    // The flags are checked (and named in errors) by the worker's own schema.
    const summary = await runWorkerCommand(input as WorkerCommandOptions, new AbortController().signal, logger, (d) => (drain = d));
    process.stdout.write(`${json ? JSON.stringify(summary) : summaryLine(summary)}\n`);
  },
};
