/**
 * The Aurora path of the Lambda runtime: credentials come from the
 * RDS-generated secret (Secrets Manager, here a stand-in speaking its JSON 1.1
 * GetSecretValue), the connection is the same `pg` path as everywhere, and
 * the schema is migrated on first use.
 */
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeFrom, secretConnection } from '../../functions/runtime.js';
import { postgresSchema } from '../support/backends.js';

describe('runtime on the Aurora path (secret → pg)', () => {
  let db: Awaited<ReturnType<typeof postgresSchema>>;
  let server: Server;
  let endpoint: string;
  const secrets = new Map<string, string>();

  beforeAll(async () => {
    db = await postgresSchema(2);
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const { SecretId } = JSON.parse(body) as { SecretId: string };
        const secret = secrets.get(SecretId);
        if (req.headers['x-amz-target'] !== 'secretsmanager.GetSecretValue' || secret === undefined) {
          res
            .writeHead(400, { 'content-type': 'application/x-amz-json-1.1' })
            .end(JSON.stringify({ __type: 'ResourceNotFoundException', message: `Secrets Manager can't find the specified secret.` }));
          return;
        }
        res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' }).end(JSON.stringify({ ARN: SecretId, Name: 'rollout', SecretString: secret }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const url = new URL(db.url);
    // The shape RDS generates for a cluster secret.
    secrets.set(
      'arn:db',
      JSON.stringify({
        engine: 'postgres',
        host: url.hostname,
        port: Number(url.port),
        username: decodeURIComponent(url.username),
        password: 'unused-locally',
        dbname: url.pathname.slice(1) || 'postgres',
        dbClusterIdentifier: 'rollout',
      }),
    );
    secrets.set('arn:bad', JSON.stringify({ host: 'db', port: 'five' }));
    secrets.set('arn:text', 'not json');
  });
  afterAll(async () => {
    server?.close();
    await db?.close();
  });

  it('connects with the secret’s credentials (TLS verification on by default), migrates, and serves the stores', async () => {
    const client = new SecretsManagerClient({ endpoint });
    const config = await secretConnection('arn:db', client);
    expect(config).toMatchObject({ user: 'postgres', ssl: { rejectUnauthorized: true } });
    expect(typeof config.database).toBe('string');
    process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER = endpoint;
    process.env.ROLLOUT_DB_TLS = 'off'; // the throwaway PostgreSQL has no TLS; Aurora always does
    process.env.PGOPTIONS = `-c search_path=${db.schema}`; // this test's schema, as pg reads it from the environment
    try {
      const rt = await runtimeFrom({ ROLLOUT_STORE: 'postgres', ROLLOUT_DB_SECRET_ARN: 'arn:db', ROLLOUT_NODE_ID: 'aurora-test' });
      await rt.stores.ledger.createRun('aurora-run', {}, Date.now());
      expect(await rt.stores.ledger.enqueue('aurora-run', [{ a: 1 }], Date.now())).toMatchObject({ added: 1 });
      expect((await db.sql.query<{ n: string }>('SELECT count(*) AS n FROM work_items')).rows[0]!.n).toBe('1');
    } finally {
      delete process.env.AWS_ENDPOINT_URL_SECRETS_MANAGER;
      delete process.env.ROLLOUT_DB_TLS;
      delete process.env.PGOPTIONS;
    }
  });

  it('the password survives rotation: a new connection asks for it, and the secret is read again once it is old', async () => {
    const client = new SecretsManagerClient({ endpoint });
    const base = JSON.parse(secrets.get('arn:db')!) as Record<string, unknown>;
    secrets.set('arn:rotating', JSON.stringify({ ...base, password: 'before-rotation' }));
    const ttl = 60_000;
    const config = await secretConnection('arn:rotating', client, 0);
    const password = config.password as () => Promise<string>;
    secrets.set('arn:rotating', JSON.stringify({ ...base, password: 'after-rotation' }));
    expect(await password()).toBe('after-rotation');
    // With a longer cache, the secret as read at start is used until it is that old.
    const cached = await secretConnection('arn:rotating', client, ttl);
    secrets.set('arn:rotating', JSON.stringify({ ...base, password: 'third' }));
    expect(await (cached.password as () => Promise<string>)()).toBe('after-rotation');
  });

  it('a malformed secret is refused naming the field; a missing one names the secret', async () => {
    const client = new SecretsManagerClient({ endpoint });
    await expect(secretConnection('arn:bad', client)).rejects.toThrow(/database secret arn:bad.*port/);
    await expect(secretConnection('arn:text', client)).rejects.toThrow(/not a JSON secret/);
    await expect(secretConnection('arn:none', client)).rejects.toThrow(/can't find the specified secret/);
    await expect(runtimeFrom({ ROLLOUT_STORE: 'postgres' })).rejects.toThrow(/DATABASE_URL or ROLLOUT_DB_SECRET_ARN/);
  });
});
