import { z } from 'zod';
import { sqsClient } from '../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../shared/adapters/sqs/queue.js';
import type { WorkQueue } from '../shared/queue/port.js';
import { RoutedWorkQueue } from '../shared/queue/routed.js';
import { jsonVariable } from '../shared/runtimes/lambda-env.js';
import { traced } from './runtime.js';

const runQueuesSchema = z.record(z.string().min(1).max(128), z.string().url());

/** ROLLOUT_RUN_QUEUES: `{ "<run id>": "<queue URL>", … }`, each worker fleet's runs and its own queue (infra/control-plane.ts); none when unset. */
export function runQueuesFrom(env: NodeJS.ProcessEnv): Readonly<Record<string, string>> {
  return jsonVariable(env, 'ROLLOUT_RUN_QUEUES', runQueuesSchema) ?? {};
}

/**
 * Where this function sends work: each fleet's runs to the fleet's own
 * queue (ROLLOUT_RUN_QUEUES), every other run to the shared work queue
 * (ROLLOUT_WORK_QUEUE_URL). `needed` says what for, in the error when unset.
 */
export function sqsWorkQueueFrom(env: NodeJS.ProcessEnv, needed: string): WorkQueue {
  const url = env.ROLLOUT_WORK_QUEUE_URL;
  if (!url) throw new Error(`invalid environment config: ROLLOUT_WORK_QUEUE_URL: required ${needed}`);
  const routes = runQueuesFrom(env);
  const sqs = traced(sqsClient());
  const shared = new SqsWorkQueue(sqs, url);
  const entries = Object.entries(routes);
  if (!entries.length) return shared;
  const byUrl = new Map<string, WorkQueue>();
  return new RoutedWorkQueue(new Map(entries.map(([run, u]) => [run, byUrl.get(u) ?? byUrl.set(u, new SqsWorkQueue(sqs, u)).get(u)!])), shared);
}
