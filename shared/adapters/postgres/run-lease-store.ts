import type { LeaseRecord } from '../../lease/record.js';
import type { CasOutcome, LeaseStore } from '../../lease/store.js';
import { PostgresLeaseStore } from './lease-store.js';
import type { Sql } from './sql.js';

/**
 * The coordinator lease of one run, with the run's epoch stamped in the same
 * transaction as every lease win, so the lease epoch and the ledger's epoch
 * never diverge.
 */
export class PostgresRunLeaseStore implements LeaseStore {
  private readonly leases: PostgresLeaseStore;

  constructor(
    private readonly sql: Sql,
    private readonly runId: string,
  ) {
    this.leases = new PostgresLeaseStore(sql);
  }

  read(name: string): Promise<LeaseRecord | null> {
    return this.leases.read(name);
  }

  compareAndSwap(expected: LeaseRecord | null, next: LeaseRecord): Promise<CasOutcome> {
    return this.sql.transaction(async (tx) => {
      const out = await new PostgresLeaseStore(tx).compareAndSwap(expected, next);
      if (out.ok && next.holder !== null) {
        await tx.query('UPDATE runs SET coordinator_epoch = $2 WHERE id = $1 AND coordinator_epoch < $2', [this.runId, next.epoch]);
      }
      return out;
    });
  }
}
