import { hostname } from 'node:os';
import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import { own } from '../../own.js';
import { MAX_ATTEMPTS } from '../../ledger/model.js';
import { DEFAULT_RETENTION } from '../../retention.js';

/**
 * A worker process of one or more runs (EC2 / ECS spot capacity, or a local
 * machine): what `createWorker` takes, and what `rollout worker` builds from
 * its flags (with the environment as defaults). A bad value is refused with
 * its name.
 */
const ID = /^[A-Za-z0-9_.:-]{1,128}$/;
/** Node.js fires a longer timer at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const workerFields = {
  runs: z.array(z.string().regex(ID, 'a run id: letters, digits, _ . : - (at most 128)')).min(1, 'at least one run').max(50, 'at most 50 runs per process'),
  /** node: the ledger, queue and registry are a node's API at `url` (npm start, a cluster); no store credentials. */
  store: z.enum(['postgres', 'dynamodb', 'node']),
  /** store node: the node's API URL (nginx in front of a cluster, or one node). */
  url: z.string().url().optional(),
  databaseUrl: z.string().min(1).optional(),
  table: z.string().min(1).optional(),
  queue: z.string().min(1).default('ledger'),
  coordinator: z.string().min(1).default('none'),
  /** A bearer token (scope `worker`) for a node with authentication on: its coordinator, or (store node) all of it. */
  token: z.string().min(1).max(16_384).optional(),
  /** PEM file of the CA a node's HTTPS certificate chains to. */
  caFile: z.string().min(1).optional(),
  workerId: z.string().min(1).default(`${hostname()}-${process.pid}`),
  instanceId: z.string().min(1).default('auto'),
  provider: z.enum(['aws', 'gcp', 'local']).default('local'),
  metadataEndpoint: z.string().url().optional(),
  heartbeatMs: z.coerce.number().int().positive().default(5_000),
  visibilitySeconds: z.coerce.number().int().positive().max(43_200).default(30),
  waitSeconds: z.coerce.number().int().min(0).max(20).default(20),
  batch: z.coerce.number().int().positive().max(1_000).default(10),
  chunkBudgetMs: z.coerce.number().positive().default(100),
  /** Not a worker's to choose (MAX_ATTEMPTS): refused, naming why, rather than dropped unread. */
  maxReceiveCount: z
    .never({
      error: `an item is tried ${MAX_ATTEMPTS} times by every worker and coordinator alike (a worker that stopped sooner would leave items Pending that nobody takes): leave it out`,
    })
    .optional(),
  exitWhenDone: z.boolean().default(false),
  /** DynamoDB: days an item this worker finishes is kept (its TTL); the stack's retention.runDays. */
  retainRunDays: z.number().positive().max(36_500).default(DEFAULT_RETENTION.runDays),
  /** How long one item may run before it fails as timed out; null: as long as it takes (heartbeats keep it). */
  itemTimeoutMs: z.number().int().positive().max(MAX_TIMER_MS, 'at most 24 days (596 h), the longest timer Node.js keeps').nullable().default(null),
  /** Fail an item whose handler has not called heartbeat() or progress() for this long; null: never. */
  stallMs: z.number().int().positive().max(MAX_TIMER_MS, 'at most 24 days (596 h), the longest timer Node.js keeps').nullable().default(null),
  /** Serve Prometheus metrics at /metrics on this port (0: any free one); null: none. */
  metricsPort: z.coerce.number().int().min(0).max(65_535).nullable().default(null),
  metricsHost: z.string().min(1).default('127.0.0.1'),
};

/** How an option is spelt to whoever gave it: `databaseUrl` to an SDK caller, `--database-url` to the command line. */
type Spell = (field: string) => string;

function storeIssues(
  o: {
    store: string;
    url?: string | undefined;
    databaseUrl?: string | undefined;
    table?: string | undefined;
    queue: string;
    coordinator: string;
    runs: readonly string[];
  },
  ctx: z.RefinementCtx,
  spell: Spell,
) {
  const issue = (field: string, message: string) => ctx.addIssue({ code: 'custom', path: [field], message });
  const with_ = (store: string) => `required with ${spell('store')} ${store}`;
  if (o.store === 'postgres' && !o.databaseUrl) issue('databaseUrl', `${with_('postgres')} (or set DATABASE_URL)`);
  if (o.store === 'dynamodb' && !o.table) issue('table', `${with_('dynamodb')} (or set ROLLOUT_TABLE)`);
  if (o.store === 'node') {
    if (!o.url) issue('url', `${with_('node')}: the node's API URL`);
    for (const f of ['databaseUrl', 'table'] as const) if (o[f]) issue(f, `a worker of a node talks to the node only: leave out ${spell(f)}`);
    if (o.queue !== 'ledger') issue('queue', "a worker of a node takes items from the node's ledger: leave out " + spell('queue'));
  } else if (o.url) issue('url', `a node's URL makes a worker of the node (${spell('store')} node), not of ${o.store}`);
  if (o.store === 'dynamodb' && o.queue === 'ledger') issue('queue', `the ledger-backed queue needs ${spell('store')} postgres; give an SQS queue URL`);
  if (o.queue !== 'ledger' && !/^https?:\/\//.test(o.queue)) issue('queue', `must be "ledger" or an SQS queue URL, got ${o.queue}`);
  // One SQS queue carries every run's messages: a worker takes what it receives, whichever run it is
  // of, so several runs in one process would take each other's items. The ledger queue is per run.
  if (o.queue !== 'ledger' && o.runs.length > 1)
    issue('runs', 'one run per process with an SQS queue (its messages are not routed by run); start a process per run');
  if (o.coordinator !== 'none' && !o.coordinator.startsWith('lambda:') && !/^https?:\/\//.test(o.coordinator))
    issue('coordinator', `must be "none", "lambda:<function>" or an http(s) URL, got ${o.coordinator}`);
}

/** An option as the SDK names it: its field. */
const field: Spell = (f) => f;
/** Flags not spelt as their field (a duration flag takes units; --run is given once per run). */
const FLAGS: Readonly<Record<string, string>> = {
  runs: '--run',
  itemTimeoutMs: '--item-timeout',
  stallMs: '--stall',
  backendTimeoutMs: '--backend-timeout',
  retainRunDays: '--retain-runs',
};
/** An option as the flag that sets it: databaseUrl is --database-url. */
const flag: Spell = (f) => own(FLAGS, f) ?? `--${f.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

export const workerOptionsSchema = z.object(workerFields).superRefine((o, ctx) => storeIssues(o, ctx, field));

/** `rollout worker`: the same, and where its items run (a backend of ours, or the user's module). */
export const workerCommandSchema = z
  .object({
    ...workerFields,
    backend: z.enum(['mock', 'http', 'module']).default('mock'),
    backendUrl: z.string().url().optional(),
    /** http backend: how long one call may take, in ms; null for no limit (heartbeats keep the item). */
    backendTimeoutMs: z.number().int().positive().nullable().default(60_000),
    /** A JavaScript module whose default (or `handler`) export runs each item. */
    module: z.string().min(1).optional(),
    mockDurationMs: z.coerce.number().int().nonnegative().default(0),
    mockFailureRate: z.coerce.number().min(0).max(1).default(0),
  })
  .superRefine((o, ctx) => {
    storeIssues(o, ctx, flag);
    if (o.backend === 'http' && !o.backendUrl) ctx.addIssue({ code: 'custom', path: ['backendUrl'], message: 'required with --backend http' });
    if (o.backend === 'module' && !o.module) ctx.addIssue({ code: 'custom', path: ['module'], message: 'required with --backend module' });
    if (o.module && o.backend !== 'module') ctx.addIssue({ code: 'custom', path: ['module'], message: `runs items itself: leave out --backend ${o.backend}` });
    // Only a module of yours can say it is alive: a backend of ours would be failed as stalled every time.
    if (o.stallMs !== null && o.backend !== 'module')
      ctx.addIssue({ code: 'custom', path: ['stallMs'], message: 'needs --module: only your handler calls heartbeat()' });
  });

export type WorkerOptionsInput = z.input<typeof workerOptionsSchema>;
export type WorkerOptions = z.output<typeof workerOptionsSchema>;
export type WorkerCommandOptions = z.input<typeof workerCommandSchema>;
export type WorkerCommandConfig = z.output<typeof workerCommandSchema>;

/** Options, or a ConfigError naming each bad one as its caller spells it. */
function parseWith<S extends z.ZodType>(schema: S, input: unknown, spell: Spell): z.output<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    'worker',
    parsed.error.issues.map((i) => `${i.path.length ? spell(String(i.path[0])) : '(options)'}: ${i.message}`),
  );
}

export const parseWorkerOptions = (input: WorkerOptionsInput): WorkerOptions => parseWith(workerOptionsSchema, input, field);
export const parseWorkerCommand = (input: WorkerCommandOptions): WorkerCommandConfig => parseWith(workerCommandSchema, input, flag);
