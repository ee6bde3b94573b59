import { createHash } from 'node:crypto';
import { toInt, type Sql } from './sql.js';

/** What a request under an Idempotency-Key was answered, kept to answer its retries the same. */
export interface RecordedAnswer {
  readonly fingerprint: string;
  readonly status: number;
  readonly response: unknown;
}

/**
 * Idempotency records on PostgreSQL (`api_requests`), used inside the
 * request's own transaction: `lock` makes same-key requests queue (the
 * second then sees the first's committed record), `find` reads it, `save`
 * writes it with the request's effects, all or nothing.
 */
export class PostgresIdempotency {
  constructor(private readonly tx: Sql) {}

  /** Held until the transaction ends. */
  async lock(key: string): Promise<void> {
    await this.tx.query('SELECT pg_advisory_xact_lock($1::bigint)', [createHash('sha256').update(`idem:${key}`).digest().readBigInt64BE(0).toString()]);
  }

  async find(key: string): Promise<RecordedAnswer | null> {
    const { rows } = await this.tx.query<{ fingerprint: string; status: unknown; response: unknown }>(
      'SELECT fingerprint, status, response FROM api_requests WHERE key = $1',
      [key],
    );
    const r = rows[0];
    return r ? { fingerprint: r.fingerprint, status: toInt(r.status), response: r.response } : null;
  }

  async save(key: string, answer: RecordedAnswer, nodeId: string): Promise<void> {
    await this.tx.query('INSERT INTO api_requests (key, fingerprint, status, response, node_id, created_at) VALUES ($1, $2, $3, $4, $5, now())', [
      key,
      answer.fingerprint,
      answer.status,
      JSON.stringify(answer.response),
      nodeId,
    ]);
  }

  /** Records older than `before` are forgotten: a retry after that is a new request. */
  async prune(before: number): Promise<void> {
    await this.tx.query('DELETE FROM api_requests WHERE created_at < $1', [new Date(before)]);
  }
}
