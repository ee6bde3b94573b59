import { hostname } from 'node:os';
import { z } from 'zod';
import { ConfigError } from '../../errors.js';

/**
 * `rollout worker`: one long-running worker process of one run (EC2 / ECS
 * spot capacity, or a local machine). Everything it needs comes from flags,
 * with the environment as defaults; a bad value is refused with its name.
 */
export const workerOptionsSchema = z
  .object({
    run: z.string().min(1, 'required'),
    store: z.enum(['postgres', 'dynamodb']),
    databaseUrl: z.string().min(1).optional(),
    table: z.string().min(1).optional(),
    queue: z.string().min(1).default('ledger'),
    coordinator: z.string().min(1).default('none'),
    /** A bearer token (scope `worker`) for a node's coordinator with authentication on. */
    token: z.string().min(1).max(16_384).optional(),
    /** PEM file of the CA a node's HTTPS certificate chains to. */
    caFile: z.string().min(1).optional(),
    backend: z.enum(['mock', 'http']).default('mock'),
    backendUrl: z.string().url().optional(),
    /** http backend: how long one call may take, in ms; null for no limit (heartbeats keep the item). */
    backendTimeoutMs: z.number().int().positive().nullable().default(60_000),
    mockDurationMs: z.coerce.number().int().nonnegative().default(0),
    mockFailureRate: z.coerce.number().min(0).max(1).default(0),
    workerId: z.string().min(1).default(`${hostname()}-${process.pid}`),
    instanceId: z.string().min(1).default('auto'),
    provider: z.enum(['aws', 'gcp', 'local']).default('local'),
    metadataEndpoint: z.string().url().optional(),
    heartbeatMs: z.coerce.number().int().positive().default(5_000),
    visibilitySeconds: z.coerce.number().int().positive().max(43_200).default(30),
    waitSeconds: z.coerce.number().int().min(0).max(20).default(20),
    batch: z.coerce.number().int().positive().max(1_000).default(10),
    chunkBudgetMs: z.coerce.number().positive().default(100),
    maxReceiveCount: z.coerce.number().int().positive().default(5),
    exitWhenDone: z.boolean().default(false),
  })
  .superRefine((o, ctx) => {
    if (o.store === 'postgres' && !o.databaseUrl) ctx.addIssue({ code: 'custom', path: ['databaseUrl'], message: 'required with --store postgres (or set DATABASE_URL)' });
    if (o.store === 'dynamodb' && !o.table) ctx.addIssue({ code: 'custom', path: ['table'], message: 'required with --store dynamodb (or set ROLLOUT_TABLE)' });
    if (o.store === 'dynamodb' && o.queue === 'ledger') ctx.addIssue({ code: 'custom', path: ['queue'], message: 'the ledger-backed queue needs --store postgres; give an SQS queue URL' });
    if (o.queue !== 'ledger' && !/^https?:\/\//.test(o.queue)) ctx.addIssue({ code: 'custom', path: ['queue'], message: `must be "ledger" or an SQS queue URL, got ${o.queue}` });
    if (o.backend === 'http' && !o.backendUrl) ctx.addIssue({ code: 'custom', path: ['backendUrl'], message: 'required with --backend http' });
    if (o.coordinator !== 'none' && !o.coordinator.startsWith('lambda:') && !/^https?:\/\//.test(o.coordinator)) {
      ctx.addIssue({ code: 'custom', path: ['coordinator'], message: `must be "none", "lambda:<function>" or an http(s) URL, got ${o.coordinator}` });
    }
  });
export type WorkerCommandOptions = z.input<typeof workerOptionsSchema>;
export type WorkerOptions = z.output<typeof workerOptionsSchema>;

/** The worker's options, or a ConfigError naming each bad flag as the user typed it. */
export function parseWorkerOptions(input: WorkerCommandOptions): z.output<typeof workerOptionsSchema> {
  const parsed = workerOptionsSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  throw new ConfigError('worker', parsed.error.issues.map((i) => `${i.path.length ? `--${String(i.path[0]).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}` : '(flags)'}: ${i.message}`));
}
