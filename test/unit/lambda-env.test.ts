import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../shared/errors.js';
import { parseLambdaEnv } from '../../shared/runtimes/lambda-env.js';
import { nodeConfigSchema, type NodeConfigInput } from '../../shared/runtimes/node/config.js';

/**
 * A Lambda function's environment (shared/runtimes/lambda-env.ts): what a node
 * takes too is checked by the one definition both read (settings.ts), and a
 * bad variable is refused with its name and what is wrong.
 */
const DYNAMO = { ROLLOUT_STORE: 'dynamodb', ROLLOUT_TABLE: 'rollout' };
const NODE: NodeConfigInput = { nodeId: 'n1', store: { kind: 'pglite', dataDir: null } };

/** The message the environment is refused with, or null when it parses. */
function refusal(env: NodeJS.ProcessEnv): string | null {
  try {
    parseLambdaEnv(env);
    return null;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.message;
  }
}

describe('the Lambda environment', () => {
  it('falls back on the defaults a node has: retention, outbound requests, targets, assignment reads, lease timings', () => {
    const env = parseLambdaEnv(DYNAMO);
    const node = nodeConfigSchema.parse(NODE);
    expect({ rolloutDays: env.ROLLOUT_RETAIN_ROLLOUTS_DAYS, runDays: env.ROLLOUT_RETAIN_RUNS_DAYS }).toEqual(node.retention);
    expect(env.ROLLOUT_OUTBOUND).toEqual(node.outbound);
    expect(env.ROLLOUT_TARGETS).toEqual(node.targets);
    expect(env.ROLLOUT_ASSIGNMENT_READ_MS).toBe(node.assignmentReadMs);
    expect([env.ROLLOUT_LEASE_TTL_MS, env.ROLLOUT_LEASE_RENEW_MS, env.ROLLOUT_LEASE_RETRY_MS]).toEqual(
      [node.leaseTtlSeconds, node.heartbeatIntervalSeconds, node.electionIntervalSeconds].map((s) => s * 1000),
    );
    expect(env.ROLLOUT_GATE_NAMESPACES).toBeNull();
  });

  it('reads each shared setting as the node does', () => {
    const outbound = {
      origins: ['https://prometheus.example:9090'],
      credentials: { prom: { type: 'bearer', origin: 'https://prometheus.example:9090', token: { env: 'PROM_TOKEN' } } },
    };
    const targets = {
      web: { type: 'nginx', include: '/etc/nginx/split.conf', config: '/etc/nginx/nginx.conf', stableUpstream: 'stable', canaryUpstream: 'canary' },
    };
    const env = parseLambdaEnv({
      ...DYNAMO,
      ROLLOUT_OUTBOUND: JSON.stringify(outbound),
      ROLLOUT_TARGETS: JSON.stringify(targets),
      ROLLOUT_RETAIN_ROLLOUTS_DAYS: '7',
      ROLLOUT_RETAIN_RUNS_DAYS: '0.5',
      ROLLOUT_ASSIGNMENT_READ_MS: '0',
    });
    const node = nodeConfigSchema.safeParse({ ...NODE, outbound, targets, retention: { rolloutDays: 7, runDays: 0.5 }, assignmentReadMs: 0 });
    expect(node.success).toBe(true);
    expect(env.ROLLOUT_OUTBOUND).toEqual(node.data!.outbound);
    expect(env.ROLLOUT_TARGETS).toEqual(node.data!.targets);
    expect([env.ROLLOUT_RETAIN_ROLLOUTS_DAYS, env.ROLLOUT_RETAIN_RUNS_DAYS]).toEqual([7, 0.5]);
    expect(env.ROLLOUT_ASSIGNMENT_READ_MS).toBe(0);
  });

  it.each([
    ['ROLLOUT_RETAIN_ROLLOUTS_DAYS', 'rolloutDays', ['0', '-1', '36501', 'ninety']],
    ['ROLLOUT_RETAIN_RUNS_DAYS', 'runDays', ['0', '40000', 'x']],
  ])('%s refuses what a node refuses as retention.%s, naming the variable', (variable, field, values) => {
    for (const text of values) {
      expect(nodeConfigSchema.safeParse({ ...NODE, retention: { [field]: Number(text) } }).success, text).toBe(false);
      expect(refusal({ ...DYNAMO, [variable]: text }), text).toMatch(new RegExp(`^invalid environment config: ${variable}: `));
    }
  });

  it('ROLLOUT_ASSIGNMENT_READ_MS refuses what a node refuses as assignmentReadMs, and takes what it takes', () => {
    for (const n of [-1, 0, 1.5, 250, 5_000, 5_001]) {
      const nodeTakes = nodeConfigSchema.safeParse({ ...NODE, assignmentReadMs: n }).success;
      const message = refusal({ ...DYNAMO, ROLLOUT_ASSIGNMENT_READ_MS: String(n) });
      expect(message === null, String(n)).toBe(nodeTakes);
      if (message) expect(message).toMatch(/^invalid environment config: ROLLOUT_ASSIGNMENT_READ_MS: /);
    }
  });

  it.each([
    [{ ROLLOUT_STORE: 'mysql' }, /^invalid environment config: ROLLOUT_STORE: /],
    [{ ROLLOUT_STORE: 'dynamodb' }, /^invalid environment config: ROLLOUT_TABLE: required when ROLLOUT_STORE=dynamodb$/],
    [
      { ROLLOUT_STORE: 'postgres' },
      /^invalid environment config: DATABASE_URL or ROLLOUT_DB_SECRET_ARN, or ROLLOUT_DB_USER with ROLLOUT_DB_HOST: one is required/,
    ],
    [{ ROLLOUT_STORE: 'postgres', ROLLOUT_DB_USER: 'promoter' }, /^invalid environment config: ROLLOUT_DB_HOST: required with ROLLOUT_DB_USER/],
    [{ ...DYNAMO, ROLLOUT_DB_PORT: '70000' }, /^invalid environment config: ROLLOUT_DB_PORT: /],
    [{ ...DYNAMO, ROLLOUT_LEASE_TTL_MS: 'soon' }, /^invalid environment config: ROLLOUT_LEASE_TTL_MS: .*NaN/],
    [
      { ...DYNAMO, ROLLOUT_LEASE_RENEW_MS: '30000' },
      /^invalid environment config: ROLLOUT_LEASE_RETRY_MS: needs TTL \(30000\) > renew \(30000\) > 1\.2 × retry \(5000\)$/,
    ],
    [{ ...DYNAMO, ROLLOUT_TICK_INTERVAL_MS: '0' }, /^invalid environment config: ROLLOUT_TICK_INTERVAL_MS: /],
    [{ ...DYNAMO, ROLLOUT_OUTBOUND: '{' }, /^invalid environment config: ROLLOUT_OUTBOUND: not JSON$/],
    [{ ...DYNAMO, ROLLOUT_OUTBOUND: '{"origins":["ftp://files.example"]}' }, /^invalid environment config: ROLLOUT_OUTBOUND\.origins\.0: an origin/],
    [{ ...DYNAMO, ROLLOUT_OUTBOUND: '{"origin":[]}' }, /^invalid environment config: ROLLOUT_OUTBOUND: .*origin/],
    [{ ...DYNAMO, ROLLOUT_TARGETS: '[' }, /^invalid environment config: ROLLOUT_TARGETS: not JSON$/],
    [{ ...DYNAMO, ROLLOUT_TARGETS: '{"web":{"type":"nginx"}}' }, /^invalid environment config: ROLLOUT_TARGETS\.web/],
    [{ ...DYNAMO, ROLLOUT_GATE_NAMESPACES: '"Shop"' }, /^invalid environment config: ROLLOUT_GATE_NAMESPACES: a JSON array of CloudWatch namespaces$/],
  ])('refuses %j, naming the variable and what is wrong', (env, message) => {
    expect(() => parseLambdaEnv(env)).toThrow(ConfigError);
    expect(refusal(env)).toMatch(message);
  });
});
