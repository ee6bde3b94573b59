import type { CommandSpec } from '../command-spec.js';
import { UsageError } from '../errors.js';

/** `rollout store`: operator's steps straight on the store (no node or stack in between), what a runbook calls for. */
export const storeCommand: CommandSpec = {
  name: 'store',
  description: 'Operator steps run straight on the store',
  commands: [
    {
      name: 'resend-pending',
      description:
        "After a failover to another region: mark every Pending item of the runs as having no message, so the coordinator's next scan sends each one on this region's queue",
      options: [
        { flags: '--run <id...>', description: 'the runs (default: every open run)' },
        { flags: '--store <kind>', description: 'where the ledger is', choices: ['postgres', 'dynamodb'], env: 'ROLLOUT_STORE', required: true },
        { flags: '--database-url <url>', description: 'PostgreSQL connection string', env: 'DATABASE_URL' },
        { flags: '--table <name>', description: 'DynamoDB table', env: 'ROLLOUT_TABLE' },
      ],
      action: async (o: { run?: string[]; store: 'postgres' | 'dynamodb'; databaseUrl?: string; table?: string }) => {
        if (o.store === 'postgres' && !o.databaseUrl) throw new UsageError('--database-url is required with --store postgres (or set DATABASE_URL)');
        if (o.store === 'dynamodb' && !o.table) throw new UsageError('--table is required with --store dynamodb (or set ROLLOUT_TABLE)');
        const { openStores } = await import('../../../compose/stores.js');
        const stores = await openStores(
          o.store === 'postgres' ? { kind: 'postgres', connection: { connectionString: o.databaseUrl!, max: 2 } } : { kind: 'dynamodb', table: o.table! },
        );
        try {
          for (const runId of o.run ?? (await stores.ledger.openRuns())) {
            let marked = 0;
            for (let n = await stores.ledger.markUnsent(runId, 1_000); n > 0; n = await stores.ledger.markUnsent(runId, 1_000)) marked += n;
            process.stdout.write(`${runId}: ${marked} pending item${marked === 1 ? '' : 's'} marked unsent; the coordinator's next scan sends them\n`);
          }
        } finally {
          await stores.close();
        }
      },
    },
  ],
};
