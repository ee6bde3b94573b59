import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { httpBackend, mockBackend, type ExecutionBackend } from '../../ledger/backends.js';
import type { Logger } from '../../log.js';
import { ConfigError } from '../../errors.js';
import { parseWorkerCommand, type WorkerCommandConfig, type WorkerCommandOptions } from './config.js';
import { handlerBackend, workerOf, type WorkerSummary, type WorkHandler } from './sdk.js';

export type { WorkerCommandOptions } from './config.js';
export type { WorkerSummary } from './sdk.js';

/**
 * `rollout worker`: a long-running worker process of one or more runs (EC2 /
 * ECS spot capacity, or a local machine), composed from its flags
 * (config.ts): the worker SDK's worker with a backend of ours (mock, http)
 * or the user's own module's handler.
 */

/** The handler a user's module exports: its default export, else `handler`. */
export async function loadHandler(file: string): Promise<WorkHandler> {
  const url = pathToFileURL(resolve(file)).href;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(url)) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError('worker', [`--module: ${file} cannot be loaded: ${(err as Error).message}`]);
  }
  const handler = typeof mod.default === 'function' ? mod.default : mod.handler;
  if (typeof handler !== 'function')
    throw new ConfigError('worker', [
      `--module: ${file} exports no handler: export default async (item, context) => result, or export a function named handler`,
    ]);
  return handler as WorkHandler;
}

async function backendOf(o: WorkerCommandConfig, logger: Logger): Promise<ExecutionBackend> {
  if (o.backend === 'module') return handlerBackend(await loadHandler(o.module!), o, logger);
  const ours =
    o.backend === 'http'
      ? httpBackend({ url: o.backendUrl!, timeoutMs: o.backendTimeoutMs })
      : mockBackend({ durationMs: o.mockDurationMs, failureRate: o.mockFailureRate });
  return handlerBackend((item, c) => ours(item.payload, c.signal), o, logger);
}

/** Runs the worker until its runs are done (with exitWhenDone), `signal` aborts, or a drain; returns its summary. */
export async function runWorkerCommand(
  input: WorkerCommandOptions,
  signal: AbortSignal,
  logger: Logger,
  drainOn?: (drain: () => void) => void,
): Promise<WorkerSummary> {
  const o = parseWorkerCommand(input);
  const worker = workerOf(o, await backendOf(o, logger), logger);
  drainOn?.(() => worker.drain());
  return worker.run(signal);
}
