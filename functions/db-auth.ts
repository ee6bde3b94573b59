import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { Signer } from '@aws-sdk/rds-signer';
import type pg from 'pg';
import { z } from 'zod';
import { parseConfig } from '../shared/config.js';
import type { LambdaEnv } from '../shared/runtimes/lambda-env.js';

/**
 * How a function logs in to Aurora. Each function logs in as its own
 * database role (shared/adapters/postgres/roles.ts) with an IAM
 * authentication token: its IAM role is granted `rds-db:connect` on that
 * database user and nothing else of the database; the migrator alone reads
 * the cluster's master secret (`secretConnection`).
 */

/** TLS verified against the CA bundle the Lambda runtime provides (NODE_EXTRA_CA_CERTS); `ROLLOUT_DB_TLS=off` for a local stand-in. */
function tls(): pg.PoolConfig['ssl'] {
  return process.env.ROLLOUT_DB_TLS === 'off' ? false : { rejectUnauthorized: true };
}

/** An IAM token lasts 15 minutes; one is reused for new connections for 10, so none is used near its end. */
export const TOKEN_REUSE_MS = 10 * 60_000;

export interface IamLogin {
  readonly host: string;
  readonly port: number;
  readonly database: string;
  readonly user: string;
  /** Default: the region the function runs in (AWS_REGION). */
  readonly region?: string;
}

/**
 * A connection config that logs in as `user` with IAM tokens. The token is
 * the password of each new connection (pg asks for it per connection); one
 * is signed on first use and again once it is `reuseMs` old. A token is
 * checked only when a connection opens, so an open connection outlives it.
 * Signing is local (SigV4 with the function's credentials): no request.
 */
export function iamConnection(
  login: IamLogin,
  o: { readonly reuseMs?: number; readonly sign?: () => Promise<string>; readonly now?: () => number } = {},
): pg.PoolConfig {
  const reuseMs = o.reuseMs ?? TOKEN_REUSE_MS;
  const now = o.now ?? Date.now;
  const sign =
    o.sign ??
    (() => {
      const signer = new Signer({ hostname: login.host, port: login.port, username: login.user, ...(login.region ? { region: login.region } : {}) });
      return () => signer.getAuthToken();
    })();
  let held: { token: Promise<string>; at: number } | null = null;
  return {
    host: login.host,
    port: login.port,
    user: login.user,
    database: login.database,
    password: () => {
      if (!held || now() - held.at >= reuseMs) {
        const token = sign();
        const mine = { token, at: now() };
        held = mine;
        // A failed signing is not kept: the next connection signs again.
        token.catch(() => {
          if (held === mine) held = null;
        });
      }
      return held.token;
    },
    ssl: tls(),
  };
}

const dbSecret = z.object({
  host: z.string().min(1),
  port: z.coerce.number().int().positive(),
  username: z.string().min(1),
  password: z.string().min(1),
  dbname: z.string().min(1).default('postgres'),
});

/**
 * A PostgreSQL connection from an RDS-generated secret (the migrator's: the
 * master user). The password survives rotation: each new connection asks for
 * it, and the secret is read again once it is `ttlMs` old (30 s), so after
 * Secrets Manager rotates it, new connections use the new password within
 * that long while open ones carry on.
 */
export async function secretConnection(secretArn: string, client = new SecretsManagerClient({}), ttlMs = 30_000): Promise<pg.PoolConfig> {
  const read = async () => {
    const { SecretString } = await client.send(new GetSecretValueCommand({ SecretId: secretArn }));
    let json: unknown;
    try {
      json = JSON.parse(SecretString ?? '');
    } catch {
      throw new Error(`database secret ${secretArn}: not a JSON secret`);
    }
    return parseConfig(`database secret ${secretArn}`, dbSecret, json);
  };
  // One read at a time: connections opened together after the secret went stale share it.
  let held = { secret: Promise.resolve(await read()), at: Date.now() };
  const s = await held.secret;
  return {
    host: s.host,
    port: s.port,
    user: s.username,
    database: s.dbname,
    password: async () => {
      if (Date.now() - held.at >= ttlMs) {
        const secret = read();
        held = { secret, at: Date.now() };
        // A failed read is not kept: the next connection asks again.
        secret.catch(() => {
          if (held.secret === secret) held = { secret, at: 0 };
        });
      }
      return (await held.secret).password;
    },
    ssl: tls(),
  };
}

/**
 * Where a function's pool connects: DATABASE_URL (a local server), else its
 * own role with IAM tokens (every function on Aurora), else the master
 * secret (the migrator). `secretsManager` makes the client a secret is read
 * with, once per secret.
 */
export function databaseConnection(env: LambdaEnv, secretsManager: () => SecretsManagerClient): Promise<pg.PoolConfig> | pg.PoolConfig {
  if (env.DATABASE_URL) return { connectionString: env.DATABASE_URL };
  if (env.ROLLOUT_DB_USER) return iamLogin({ host: env.ROLLOUT_DB_HOST!, port: env.ROLLOUT_DB_PORT, database: env.ROLLOUT_DB_NAME, user: env.ROLLOUT_DB_USER });
  return cachedSecretConnection(env.ROLLOUT_DB_SECRET_ARN!, secretsManager);
}

/** One login per role for the sandbox's life, so a runtime opened per invocation reuses its token. */
const iamLogins = new Map<string, pg.PoolConfig>();

function iamLogin(login: IamLogin): pg.PoolConfig {
  const key = JSON.stringify(login);
  let config = iamLogins.get(key);
  if (!config) {
    config = iamConnection(login);
    iamLogins.set(key, config);
  }
  return config;
}

/**
 * One connection config per secret for the sandbox's life: a runtime opened
 * for each invocation (`invocationScoped`) does not read the secret each
 * time; the password inside still follows rotation (`secretConnection`).
 */
const secretConfigs = new Map<string, Promise<pg.PoolConfig>>();

function cachedSecretConnection(secretArn: string, secretsManager: () => SecretsManagerClient): Promise<pg.PoolConfig> {
  let config = secretConfigs.get(secretArn);
  if (!config) {
    config = secretConnection(secretArn, secretsManager());
    secretConfigs.set(secretArn, config);
    // A failed read is not kept: the next invocation asks again.
    config.catch(() => secretConfigs.delete(secretArn));
  }
  return config;
}
