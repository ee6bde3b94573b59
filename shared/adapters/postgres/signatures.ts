import type { SeenSignatures } from '../../auth/signature.js';
import type { Sql } from './sql.js';

/** Signed signals seen, in `signal_signatures`: one row per signature, kept past its window and then pruned. */
export class PostgresSeenSignatures implements SeenSignatures {
  constructor(private readonly sql: Sql) {}

  async firstSeen(signature: string): Promise<boolean> {
    const { rows } = await this.sql.query('INSERT INTO signal_signatures (signature) VALUES ($1) ON CONFLICT (signature) DO NOTHING RETURNING signature', [
      signature,
    ]);
    return rows.length === 1;
  }

  /** Signatures seen before `before` (ms) are forgotten: their window has closed, so they would be refused anyway. */
  async prune(before: number): Promise<void> {
    await this.sql.query('DELETE FROM signal_signatures WHERE seen_at < $1', [new Date(before)]);
  }
}
