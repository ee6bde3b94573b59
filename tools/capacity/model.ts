/**
 * A DISCRETE-EVENT MODEL of a work run on the sharded DynamoDB ledger — a
 * model, not DynamoDB: it predicts how fast a run goes and which key runs
 * hot from the ledger's own requests, AWS's published per-key limits and a
 * few stated assumptions, nothing measured in AWS. Pure, seeded and
 * deterministic: the same input gives the same result, to the request.
 *
 * What it simulates, request by request, on a simulated clock:
 * - a producer enqueueing the items (PutItem each, as DynamoLedgerStore.enqueue
 *   does, a bounded number in flight, every put tried though one was refused),
 *   sending their messages (SendMessageBatch, 10 a call, one call after another
 *   as SqsWorkQueue.send does) and, in a deployment, recording them sent
 *   (markSent, dispatch.ts). In a deployment the producer is
 *   RolloutClient.enqueueRun (shared/client/producer.ts): items come at the
 *   target rate, requests go out as its window allows, and a refused one (503,
 *   or Lambda's concurrency spent) halves the window, holds every new request
 *   back for its Retry-After (1 s) and is sent again whole;
 * - W workers running Worker.step (shared/ledger/worker/): receive up to 10
 *   (fewer, after a pause, once throttled: slowDown / speedUp), read the run
 *   record if the last read is a minute old (RUN_RECORD_TTL_MS),
 *   claim each (bounded concurrency), extend
 *   the messages' visibility (10 a call); start a chunk (one item at a time when
 *   items are slow, up to maxChunk when fast), run it, ack in batches, delete the
 *   messages 10 a call; heartbeat rounds HEARTBEAT_ROUNDS times every heartbeatMs,
 *   each writing the held items heartbeatDue and extending the messages
 *   extensionDue (10 a call); when idle, reconcile only after an ask whose
 *   answer was lost (a query of every RUNNING key's entries, then its own
 *   items read: the workers are new to the registry, so none at start), ask
 *   the coordinator for work, long-poll;
 * - a round of item writes as casMany answers it: every write settles, and
 *   one past every retry leaves the others answered (PartialBatchError) —
 *   claims that landed are held, an unanswered claim's message comes back
 *   after the queue's visibility timeout (60 s), acks answered leave the list
 *   and the rest are sent at a later flush, a start round put back as the
 *   ledger has it (Worker.startRound); a refusal applied nothing, so the
 *   worker neither fails the step for a claim round answered in part nor
 *   reads the running set after a step that failed on one: it halves its
 *   receive batch and pauses before the next receive (100 ms doubling to
 *   2 s), and a failed step backs off (250 ms doubling);
 * - in a deployment, the coordinator Lambda, on warm sandboxes it reuses: a
 *   cold sandbox reads the lease and adopts it without a write while it has
 *   more than half its TTL left; a sandbox writes it only past half its TTL
 *   (a renewal, again when another sandbox renewed first): no lease write per
 *   ask. Before its first fenced write a sandbox reads the
 *   fence marker; finding none, it raises the shard fences (≤ 99 a
 *   transaction, each with the lease's check) and puts it. An idle worker's
 *   ask reads the run's steal hint and answers from what it read: tries a
 *   take of each entry, busiest first, until one is won (a take, won or
 *   lost, costs the hint's size), then moves its items, a fenced transaction
 *   each, one at a time; a stale hint is rebuilt by the one ask that wins the
 *   claim (the running set's entries, the candidates' items, a put). The scan every
 *   minute reads the running set's entries and every running item, re-pends
 *   silent items after the 30 s failure timeout and re-sends unsent ones.
 *   Fenced writes condition-check their shard's fence: a sandbox's own go in
 *   turn per fence; one arriving while another sandbox's transaction on the
 *   fence is in flight is cancelled (a conflict: counted, nothing charged)
 *   and retried as conflicts.ts does. Invocations past the account's
 *   concurrency are refused (429).
 * Every DynamoDB request is charged to the keys `ITEM_WRITES` names
 * (shared/ledger/capacity.ts): the item's shard partition and its shard's
 * PENDING / RUNNING keys, per fixed window of `windowMs`. As the throttling
 * simulator does (test/support/dynamodb-throttle.ts), a request is refused
 * when one of its keys has already used (or reserved) its limit in the current
 * window; it applied nothing and is retried as the code retries it: the SDK's
 * standard mode (4 attempts, throttling backoff 1 s doubling, full jitter, a
 * 500-token retry quota at 5 a retry), then `retryingThrottles` (8 attempts,
 * 50 ms doubling to 2 s, full jitter; throttles.ts). Fenced transactions are
 * not retried by the SDK: conflicts.ts retries them (10 attempts, 10 ms to
 * 400 ms). A refused request still costs the store a request.
 *
 * The store serves at most `machineRequestsPerSecond` requests (DynamoDB and
 * SQS alike: one FIFO server), each also taking a fixed latency. On this
 * machine that ceiling is calibrated from the unlimited benchmark run; in AWS
 * it is effectively unlimited, and the table's on-demand throughput quota
 * (`tableQuota`) applies instead, metered like a key; so do SQS's in-flight
 * limit (receives return nothing past it) and Lambda's concurrency.
 *
 * Scale. `weight` k makes each simulated worker, item and request stand for k
 * real ones moving in lockstep (k = 1 at the benchmark's scale: one simulated
 * request per real request). A simulated item's k real items are hashed to
 * shards independently (k uniform draws, seeded), so per-key loads have the
 * real spread; its requests charge each of those shards its share. A request
 * is admitted or refused whole (all k), which overstates throttling on a key
 * near its limit, and k workers in lockstep make bursts k times larger than
 * independent ones would (the fleet's heartbeats are spread over their
 * interval; the benchmark's, started together, are not). The same code runs
 * both scales; only k and the inputs differ. What happens once a run — the
 * hint's rebuild (its reads and put), the fences' raise — is charged once,
 * not k times; an ask's hint read, claim and take, and a sandbox's lease
 * writes, are k's. A hint lists STEAL_HINT_VICTIMS real victims, so
 * STEAL_HINT_VICTIMS / k simulated ones (the fraction drawn from the seeded
 * random source): fruitful steals keep their real rate on average, k at a time.
 * A simulated take is its k real thieves' busiest-first takes of the (up to
 * STEAL_HINT_VICTIMS) real entries its entry stands for: they collide with
 * each other as the real ones would (steal-hint.ts busiestFirstTakes), while the
 * entry moves whole to the simulated thief.
 *
 * Simplified or not modelled: latencies are fixed, not distributed; one FIFO
 * server stands for the machine's CPUs; no crashes and no poison; a message is
 * delivered once until it comes back (no duplicates); a victim learns of a
 * steal at once; a hint read sees the hint as last written (no replication
 * lag); a take is charged the hint's size as it stands when sent; a
 * transaction cancelled for a conflict is charged no units; Lambda cold
 * starts' latency and its scaling rate (1,000 environments per 10 s) are not
 * modelled, only its concurrency, and a warm sandbox is never reclaimed;
 * DynamoDB's burst credits, adaptive capacity, splits for heat and on-demand
 * scaling (warm throughput) are not modelled — a table is taken as warm for
 * whatever its quota allows.
 *
 * Where each part lives (model/): the producer (producer.ts, dispatch.ts),
 * the workers (worker.ts), the coordinator sandbox (coordinator.ts), the
 * steal path (steal.ts) and the scan (scan.ts) act on the state in
 * state.ts (which imports none of them) through the services they call:
 * the table and its key limits (table.ts), the SDK retries and the machine
 * (requests.ts, sdk.ts), the ledger store's requests (ledger-store.ts), the
 * queue (queue.ts) and Lambda's concurrency (lambda.ts); a process waits on
 * the clock (events.ts) as processes.ts runs it. simulation.ts composes
 * them. Inputs and results are in types.ts, the two scales in scales.ts.
 * This module is what the rest imports.
 */
export { seededRandom } from './model/events.js';
export { SDK_RETRY } from './model/sdk.js';
export {
  BENCH_COORDINATOR_LEASE,
  BENCH_LATENCY_MS,
  benchModelInput,
  calibrateMachine,
  deploymentModelInput,
  medianRun,
  modelCost,
  type BenchParams,
  type DeploymentParams,
} from './model/scales.js';
export { simulate } from './model/simulation.js';
export { simulatedTake, takeOrder } from './model/steal.js';
export type { Family, KeyLimits, ModelInput, ModelResult, ModelTrace, Producer, TableQuota, WorkerBehaviour } from './model/types.js';
