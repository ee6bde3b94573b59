import type { Sql } from './sql.js';

/** Per-run figures a node keeps for its status page (drains are read from the worker registry). */
export class PostgresRunStats {
  constructor(private readonly sql: Sql) {}

  /** Items a steal moved. */
  async addSteals(runId: string, n: number): Promise<void> {
    await this.sql.query('INSERT INTO run_stats (run_id, steals) VALUES ($1, $2) ON CONFLICT (run_id) DO UPDATE SET steals = run_stats.steals + $2', [
      runId,
      n,
    ]);
  }
}
