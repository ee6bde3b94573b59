/**
 * IAM database logins (functions/db-auth.ts): the token is the password of
 * each new connection, signed again before its 15-minute life ends, and a
 * failed signing is not kept.
 */
import { describe, expect, it } from 'vitest';
import { iamConnection, TOKEN_REUSE_MS } from '../../functions/db-auth.js';

const LOGIN = { host: 'db.cluster-x.eu-west-1.rds.amazonaws.com', port: 5433, database: 'rollout', user: 'rollout_api', region: 'eu-west-1' };

describe('iamConnection', () => {
  it('logs in as the role at the endpoint, TLS verified; a token is reused for 10 minutes, then signed again, well inside its 15', async () => {
    let clock = 1_000_000;
    let signed = 0;
    const config = iamConnection(LOGIN, { sign: () => Promise.resolve(`token-${++signed}`), now: () => clock });
    expect(config).toMatchObject({ host: LOGIN.host, port: 5433, user: 'rollout_api', database: 'rollout', ssl: { rejectUnauthorized: true } });
    expect(TOKEN_REUSE_MS).toBeLessThan(15 * 60_000);
    const password = config.password as () => Promise<string>;
    expect(await password()).toBe('token-1');
    clock += TOKEN_REUSE_MS - 1;
    expect(await password()).toBe('token-1');
    clock += 1;
    expect(await password()).toBe('token-2');
    expect(signed).toBe(2);
  });

  it('a signing that failed is not kept: the next connection signs again', async () => {
    let calls = 0;
    const config = iamConnection(LOGIN, {
      sign: () => (++calls === 1 ? Promise.reject(new Error('no credentials')) : Promise.resolve('token')),
      now: () => 0,
    });
    const password = config.password as () => Promise<string>;
    await expect(password()).rejects.toThrow('no credentials');
    expect(await password()).toBe('token');
  });

  it('signs with the SDK signer by default: an rds-db connect URL for the user, as the password', async () => {
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID = 'AKIAEXAMPLE';
    process.env.AWS_SECRET_ACCESS_KEY = 'secret';
    try {
      const token = await (iamConnection(LOGIN).password as () => Promise<string>)();
      expect(token.startsWith(`${LOGIN.host}:5433/?`)).toBe(true);
      const query = new URLSearchParams(token.slice(token.indexOf('?') + 1));
      expect(query.get('Action')).toBe('connect');
      expect(query.get('DBUser')).toBe('rollout_api');
      expect(query.get('X-Amz-Credential')).toContain('/eu-west-1/rds-db/aws4_request');
      expect(Number(query.get('X-Amz-Expires'))).toBe(900);
    } finally {
      for (const [k, v] of [
        ['AWS_ACCESS_KEY_ID', saved.id],
        ['AWS_SECRET_ACCESS_KEY', saved.secret],
      ] as const)
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
    }
  });
});
