/**
 * The simulation's state: what every simulated part reads and writes — the
 * clock and its event queue, the items and their messages, the keys'
 * windows, the queue, the workers' and the coordinator sandboxes' memories,
 * the steal hint, the counters — laid out once from the model's input.
 * It imports none of the parts: they take it (producer.ts, dispatch.ts,
 * worker.ts, coordinator.ts, steal.ts, scan.ts and the services they call),
 * and simulation.ts composes them.
 */
import { ProducerWindow } from '../../../shared/client/producer.js';
import { INDEX_ENTRY_KB, unitsPerWrite } from '../../../shared/ledger/capacity.js';
import { Events, seededRandom } from './events.js';
import { type Client, SDK_RETRY } from './sdk.js';
import type { ModelInput } from './types.js';

// The table's key ids (table.ts meters them). Key families in key-id order: per-shard families first (id = family × N + shard),
// then the singletons (the fences after the hint).
export const F_ITEM = 0;
export const F_PENDING = 1;
export const F_RUNNING = 2;

/** A coordinator Lambda execution environment (coordinator.ts): what it keeps across invocations. */
export interface Sandbox {
  /** The lease's expiry as it last saw it (0: cold): its token is good until then. */
  tokenUntil: number;
  /** It saw this epoch's fences raised (read the marker, or raised them). */
  fencesSeen: boolean;
  /** Fences its own fenced transactions are on, and those waiting their turn (conflicts.ts inTurn). */
  readonly turns: Set<number>;
  readonly waiting: { readonly fences: readonly number[]; readonly go: () => void }[];
  /** A process coordinator's asks waiting on the ensure one of them is making (RunFences shares it): set while one is. */
  ensuring?: (() => void)[];
}

/** The run's steal hint as last written (steal.ts): victims (simulated worker → simulated items) and the rebuild claim. */
export interface Hint {
  builtAt: number;
  claimedUntil: number;
  victims: Map<number, number[]>;
}

/** A simulated worker's memory (worker.ts Worker): what it holds, its pace, when it next asks. */
export interface WorkerState {
  readonly id: number;
  readonly client: Client;
  backlog: number[];
  executing: number[];
  outcomes: number[];
  /** Running(this worker) in the ledger: what its reconcile finds, less what it holds. */
  owned: Set<number>;
  itemMs: number | null;
  beating: boolean;
  stopped: boolean;
  /** Worker.reconcileDue: after an ask whose answer was lost (the model's workers are new to the registry: none at start). */
  reconcileDue: boolean;
  /** Asks that found nothing since work last came, and when the next is due (stealBackoffMs). */
  fruitless: number;
  nextAskAt: number;
  /** When its run-record read was sent (Worker.runEpoch): another only once RUN_RECORD_TTL_MS has passed. */
  epochReadAt: number;
  /** Worker.pace: the receive batch (starting at receiveBatch, which caps it, as the code does) and the pause before a receive. */
  batch: number;
  pauseMs: number;
}

/** The state of one simulated run, laid out from its input (the same seed, the same layout: shards are drawn here first). */
export class SimState {
  readonly rand: () => number;
  readonly ev = new Events();
  now = 0;
  readonly k: number;
  readonly stopAtMs: number;
  readonly n: number; // shards (1 for the first layout)
  readonly w: number; // units per write of an item
  readonly e: number; // units per write of an index entry
  readonly itemRead: number; // units of a consistent read of an item
  readonly simItems: number;
  readonly simWorkers: number;
  // Keys: 3 per shard, then the run record, the lease, the RUNS index key, the steal hint, a fence per shard, the fence marker.
  readonly keyCount: number;
  readonly kRunRecord: number;
  readonly kLease: number;
  readonly kRuns: number;
  readonly kHint: number;
  readonly kMarker: number;
  readonly kFence0: number;
  readonly isGsi: Uint8Array;
  readonly keyWindow: Float64Array;
  readonly used: [Float64Array, Float64Array];
  readonly reserved: [Float64Array, Float64Array];
  readonly peak: [Float64Array, Float64Array];
  readonly keyRefused: Float64Array;
  readonly limit: [number, number, number, number]; // table W, table R, gsi W, gsi R per window
  readonly quota: [number, number, number, number] | null; // per window
  tableWindow = -1;
  readonly tableUsed = [0, 0, 0, 0]; // table W, table R, gsi W, gsi R
  readonly tableReserved = [0, 0, 0, 0];
  readonly tablePeak = [0, 0, 0, 0];
  // Items: their shard slots (k draws grouped), state, holder.
  readonly slotStart: Int32Array;
  readonly slotShard: Int32Array;
  readonly slotCount: Float64Array;
  readonly state: Uint8Array; // 0 stored, unsent; 1 pending with a message; 2 running; 3 done
  readonly owner: Int32Array;
  readonly started: Uint8Array;
  readonly stored: Uint8Array; // enqueued (its PutItem landed)
  readonly hasMsg: Uint8Array; // a message exists (queued or in flight)
  readonly msgInFlight: Uint8Array; // received, neither deleted nor visible again
  readonly msgDue: Float64Array; // when an in-flight message becomes visible again
  readonly msgRef: Uint8Array; // the holding worker has the message's receipt (extends and deletes it)
  readonly sentRecorded: Uint8Array; // markSent landed
  readonly heldBy: Int32Array; // the worker whose memory (backlog, chunk, outcomes) has it
  readonly lastBeat: Float64Array; // its heartbeatAt: claim, start, heartbeat, steal
  readonly wrote: Float64Array; // when its holder last sent a write of it, as the holder knows (-Infinity: not known)
  readonly knownVisible: Float64Array; // until when its holder knows its message invisible (-Infinity: not known)
  readonly staleSeen: Uint8Array; // judged silent at the scan before (HeartbeatWatch needs two looks)
  readonly startUnknown: Uint8Array; // started by its holder, who took it back as unstarted (its read failed)
  readonly pendingCnt: Float64Array; // real entries under each shard's PENDING key
  readonly runningCnt: Float64Array;
  readonly unsentCnt: Float64Array;
  readonly queue: number[] = [];
  queueHead = 0;
  readonly pollers: (() => void)[] = [];
  serverFree = 0;
  readonly serviceMs: number;
  readonly workers: WorkerState[] = [];
  readonly sharedClient: Client = { quota: SDK_RETRY.quota };
  readonly coordinatorClient: Client = { quota: SDK_RETRY.quota };
  /** Warm coordinator sandboxes not serving an invocation (the last freed is reused first). */
  readonly idleBoxes: Sandbox[] = [];
  /** The one coordinator of `coordinatorProcess`: its token never lapses (its elector renews it), so asks write no lease. */
  readonly processBox: Sandbox | null;
  /** When the lease expires unless renewed (the lease is never lost here: no coordinator crashes). */
  leaseUntil = 0;
  /** The fence marker is written (this epoch's fences are raised). */
  fencesUp = false;
  /** Fenced transactions in flight per key (only fence keys and the lease are ever counted). */
  readonly fenceBusy: Int32Array;
  readonly hint: Hint = { builtAt: 0, claimedUntil: 0, victims: new Map() };
  doneItems = 0;
  lastAck = 0;
  finished = false;
  running = 0; // workers still looping
  endAt: number | null = null;
  workStartedAt = 0;
  // Counters (real units: × weight).
  ddbRequests = 0;
  sqsRequests = 0;
  refusedRequests = 0;
  tableRefused = 0;
  exhaustedRequests = 0;
  failedSteps = 0;
  throttledRounds = 0;
  enqueueRetries = 0;
  enqueueLongestMs = 0;
  /** The producer's pacing (RolloutClient.enqueueRun), and its requests in flight, refused ones waiting to be resent included. */
  readonly producerWindow = new ProducerWindow();
  producerInFlight = 0;
  readonly exhaustedBy = new Map<string, number>();
  repended = 0;
  readonly refusedByFamily = new Map<string, number>();
  wcu = 0;
  indexWcu = 0;
  rcu = 0;
  inFlight = 0;
  inFlightPeak = 0;
  lambdaInvocations = 0;
  lambdaConcurrency = 0;
  lambdaConcurrencyPeak = 0;
  lambdaGbSeconds = 0;
  lambdaThrottled = 0;
  sqsOverLimit = 0;
  steals = 0;
  hintRebuilds = 0;
  hintClaims = 0;
  hintTakes = 0;
  fruitfulSteals = 0;
  leaseRenewals = 0;
  leaseWrites = 0;
  fenceConflicts = 0;
  runRecordReads = 0;
  readonly timeline: { t: number; done: number; throttled: number; dynamodb: number }[] = [];
  itemsStolen = 0;

  constructor(readonly o: ModelInput) {
    if (!(o.items >= 1 && o.workers >= 1 && o.weight >= 1)) throw new Error('model: items, workers and weight must be at least 1');
    this.rand = seededRandom(o.seed);
    this.k = o.weight;
    this.stopAtMs = (o.stopAfterSeconds ?? 86_400) * 1000;
    this.n = o.shards ?? 1;
    this.w = unitsPerWrite(o.itemKb);
    this.e = unitsPerWrite(INDEX_ENTRY_KB);
    this.itemRead = Math.max(1, Math.ceil(o.itemKb / 4));
    this.simItems = Math.max(1, Math.round(o.items / this.k));
    this.simWorkers = Math.max(1, Math.round(o.workers / this.k));
    this.kRunRecord = o.shards === null ? F_ITEM * this.n : 3 * this.n; // the first layout: the record shares the items' partition
    this.kLease = 3 * this.n + 1;
    this.kRuns = 3 * this.n + 2;
    this.kHint = 3 * this.n + 3;
    this.kFence0 = 3 * this.n + 4;
    this.kMarker = 4 * this.n + 4;
    this.keyCount = 4 * this.n + 5;
    this.fenceBusy = new Int32Array(this.keyCount);
    this.isGsi = new Uint8Array(this.keyCount);
    for (let s = 0; s < this.n; s++) {
      this.isGsi[F_PENDING * this.n + s] = 1;
      this.isGsi[F_RUNNING * this.n + s] = 1;
    }
    this.isGsi[this.kRuns] = 1;
    this.keyWindow = new Float64Array(this.keyCount).fill(-1);
    const arr = () => new Float64Array(this.keyCount);
    this.used = [arr(), arr()];
    this.reserved = [arr(), arr()];
    this.peak = [arr(), arr()];
    this.keyRefused = arr();
    const l = o.limits;
    this.limit = [l.partitionWcu, l.partitionRcu, l.gsiWcu ?? l.partitionWcu, l.gsiRcu ?? l.partitionRcu];
    const perWindow = l.windowMs / 1000;
    this.quota = o.tableQuota
      ? [o.tableQuota.wcu * perWindow, o.tableQuota.rcu * perWindow, o.tableQuota.gsiWcu * perWindow, o.tableQuota.gsiRcu * perWindow]
      : null;
    this.serviceMs = Number.isFinite(o.machineRequestsPerSecond) ? (1000 * this.k) / o.machineRequestsPerSecond : 0;
    this.processBox = o.coordinatorProcess ? { tokenUntil: Number.POSITIVE_INFINITY, fencesSeen: false, turns: new Set(), waiting: [] } : null;
    // Each simulated item's k real items, hashed to shards one by one.
    this.slotStart = new Int32Array(this.simItems + 1);
    const shards: number[] = [];
    const counts: number[] = [];
    const tally = new Map<number, number>();
    for (let i = 0; i < this.simItems; i++) {
      this.slotStart[i] = shards.length;
      tally.clear();
      if (this.n === 1) tally.set(0, this.k);
      else
        for (let j = 0; j < this.k; j++) {
          const s = Math.floor(this.rand() * this.n);
          tally.set(s, (tally.get(s) ?? 0) + 1);
        }
      for (const [s, c] of tally) {
        shards.push(s);
        counts.push(c);
      }
    }
    this.slotStart[this.simItems] = shards.length;
    this.slotShard = Int32Array.from(shards);
    this.slotCount = Float64Array.from(counts);
    this.state = new Uint8Array(this.simItems);
    this.owner = new Int32Array(this.simItems).fill(-1);
    this.started = new Uint8Array(this.simItems);
    this.stored = new Uint8Array(this.simItems);
    this.hasMsg = new Uint8Array(this.simItems);
    this.msgInFlight = new Uint8Array(this.simItems);
    this.msgDue = new Float64Array(this.simItems);
    this.msgRef = new Uint8Array(this.simItems);
    this.sentRecorded = new Uint8Array(this.simItems);
    this.heldBy = new Int32Array(this.simItems).fill(-1);
    this.lastBeat = new Float64Array(this.simItems);
    this.wrote = new Float64Array(this.simItems).fill(Number.NEGATIVE_INFINITY);
    this.knownVisible = new Float64Array(this.simItems).fill(Number.NEGATIVE_INFINITY);
    this.staleSeen = new Uint8Array(this.simItems);
    this.startUnknown = new Uint8Array(this.simItems);
    this.pendingCnt = new Float64Array(this.n);
    this.runningCnt = new Float64Array(this.n);
    this.unsentCnt = new Float64Array(this.n);
  }
}
