import type { RolloutEvent } from '../rollout/events.js';

/**
 * What the status page (GET /ui/state) reads beside the rollout and ledger
 * ports: which rollouts and runs it shows, each rollout's newest transitions,
 * each run's figures and newest failures. Every list is capped by the caller,
 * so what a viewer is sent each second stays the same size however long a
 * rollout's or a run's history grows. Adapters: PostgreSQL and PGlite
 * (adapters/postgres/status-reads.ts), DynamoDB (adapters/dynamodb/status-reads.ts,
 * which says where its table layout bounds an answer differently).
 */
export interface StatusReads {
  /** Rollouts in flight (running, paused), the latest changed first, at most `live`; then the latest finished, at most `finished`. */
  rollouts(o: { readonly live: number; readonly finished: number }): Promise<string[]>;
  /**
   * The newest `limit` transitions of each rollout, newest first. The gate
   * readings, metrics and labels an event carries are left out: the page
   * lists what, who, when and why.
   */
  transitions(rolloutIds: readonly string[], limit: number): Promise<Map<string, RolloutEvent[]>>;
  /** The newest `limit` runs, newest first, with what the page shows of each beside its counts. */
  runs(limit: number): Promise<RunFigures[]>;
  /** Each run's newest failed items, at most `limit` a run, newest first, each reason cut to `reasonChars` characters. */
  failures(runIds: readonly string[], o: { readonly limit: number; readonly reasonChars: number }): Promise<Map<string, FailedItem[]>>;
  /**
   * Rollouts and runs whose id no request path reaches (`.` and `..`, which
   * URL clients resolve as dot segments), created before the id rule refused
   * them: rollouts first.
   */
  unaddressable(): Promise<{ kind: 'rollout' | 'run'; id: string }[]>;
}

export interface RunFigures {
  readonly id: string;
  /** Milliseconds since the Unix epoch. */
  readonly createdAt: number;
  readonly coordinatorEpoch: number;
  /** Items moved by steals; null where the store keeps no such count (DynamoDB: a node's coordinators count them, on PostgreSQL). */
  readonly steals: number | null;
  /** The run's workers asked to drain. */
  readonly drains: number;
}

export interface FailedItem {
  readonly id: string;
  readonly error: string | null;
  readonly attempts: number;
  readonly worker: string | null;
  /** When it failed (its last change), milliseconds since the Unix epoch. */
  readonly at: number;
}
