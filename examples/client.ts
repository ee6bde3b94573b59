/** The typed client in a pipeline and a producer (docs/guides/pipeline.md#the-typed-client, and docs/guides/cli.md#client-commands). */
import type { RolloutSpec } from 'rollout-control-plane';
declare const spec: RolloutSpec; // parseRolloutSpec(yourSpec): refused here, naming the field, before it is sent
declare const url: string;
declare function readItems(): AsyncIterable<{ readonly index: string }>;

// #region pipeline
import { RolloutClient, ApiError } from 'rollout-control-plane';

const client = new RolloutClient({ url: 'https://rollouts.internal', token: process.env.ROLLOUT_TOKEN });
const { id } = await client.createRollout(spec, { id: `web-${process.env.GIT_SHA}` }); // idempotent on id
const ended = await client.waitForRollout(id, { timeoutMs: 30 * 60_000 });            // completed | rolled_back | aborted
if (ended.state !== 'completed') throw new Error(`${id} ${ended.state}: ${ended.stateReason}`);
// #endregion pipeline
void ApiError; // what the client throws for an answer it was refused (status, body)

// #region enqueue
const report = await new RolloutClient({ url }).enqueueRun({ id: 'nightly', items: readItems(), spec: { kind: 'reindex' } });
// { id, created, requests, items, added, refused, inFlightPeak }
// #endregion enqueue
void report;
