import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { connectPostgres } from '../shared/adapters/postgres/connect.js';
import { DATABASE_ROLES, mayCreateRoles } from '../shared/adapters/postgres/roles.js';
import { errorMessage } from '../shared/log.js';
import { secretConnection } from './db-auth.js';
import { lambdaLogger } from './log.js';

/**
 * Aurora only: migrates the schema and sets up each function's database
 * role (shared/adapters/postgres/roles.ts), as the cluster's master user.
 * The one function that reads the master secret; the others log in as their
 * own role with IAM tokens and may not change the schema. The stack runs it
 * at deploy (a CDK Trigger), after the cluster and before the functions are
 * updated, and again whenever its code (so the migrations) changes.
 */
export function migratorHandler(
  secretArn: string | undefined = process.env.ROLLOUT_DB_SECRET_ARN,
  logger = lambdaLogger('migrator'),
  secrets: () => SecretsManagerClient = () => new SecretsManagerClient({}),
): () => Promise<{ roles: string[] }> {
  return async () => {
    if (!secretArn) throw new Error('invalid environment config: ROLLOUT_DB_SECRET_ARN: required (the cluster secret the migrator logs in with)');
    try {
      // Migrates, then sets up the roles: connectPostgres does both for a user that may create roles.
      const db = await connectPostgres({ ...(await secretConnection(secretArn, secrets())), max: 1 });
      const may = await mayCreateRoles(db.sql).finally(() => db.close());
      if (!may) throw new Error(`the user of ${secretArn} may not create roles: the functions' database roles were not set up`);
    } catch (err) {
      logger.error('migration failed', { error: errorMessage(err) });
      throw err;
    }
    const roles = Object.keys(DATABASE_ROLES);
    logger.info('schema migrated; database roles set', { roles });
    return { roles };
  };
}

export const handler = migratorHandler();
