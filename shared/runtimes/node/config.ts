import { hostname as osHostname } from 'node:os';
import { z } from 'zod';
import type { StoreConfig } from '../../compose/stores.js';
import { oidcConfigSchema } from '../../adapters/oidc/authenticator.js';
import { SCOPES } from '../../auth/scopes.js';
import { DEFAULT_LEASE, leaseCadenceHolds, runtimeSettings } from '../settings.js';

/** A node's configuration (`rollout serve` flags and environment, `npm start`), validated as a whole. */
export const ELECTORS = ['lease', 'advisory-lock', 'static'] as const;
export type ElectorKind = (typeof ELECTORS)[number];

/** Leadership changes wake followers on this channel (a resigning leader is replaced at once, not at the next retry). */
export const LEADER_CHANNEL = 'rollout_leader';

const seconds = z.number().positive();
export const nodeConfigSchema = z
  .object({
    nodeId: z
      .string()
      .trim()
      .min(1)
      .max(255)
      .regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits, _ . : -'),
    hostname: z.string().trim().min(1).max(255).default(osHostname()),
    /** Interface to listen on. */
    host: z.string().min(1).default('127.0.0.1'),
    port: z.number().int().min(0).max(65_535).default(8000),
    /** The URL other nodes and proxies reach this node at (default http://<host>:<port>). */
    apiUrl: z.string().url().optional(),
    store: z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('postgres'), databaseUrl: z.string().min(1, 'DATABASE_URL is required for a PostgreSQL node') }),
      z.object({ kind: z.literal('pglite'), dataDir: z.string().min(1).nullable() }),
    ]),
    elector: z.enum(ELECTORS).default('lease'),
    leaseTtlSeconds: seconds.default(DEFAULT_LEASE.ttlMs / 1000),
    heartbeatIntervalSeconds: seconds.default(DEFAULT_LEASE.renewIntervalMs / 1000),
    electionIntervalSeconds: seconds.default(DEFAULT_LEASE.retryIntervalMs / 1000),
    /** A node silent this long is unhealthy. */
    electionTimeoutSeconds: seconds.default(15),
    monitorIntervalSeconds: seconds.default(15),
    /** A node silent this long is removed (node_left). */
    deadAfterSeconds: seconds.default(180),
    /** BatchPromoter cadence (the topology's 10 s by default). */
    tickIntervalSeconds: seconds.optional(),
    /** Coordinator failure scan of open runs. */
    scanIntervalSeconds: seconds.default(5),
    /** Followers answer writes with 307 to the leader instead of 503 with the leader named. */
    redirectWrites: z.boolean().default(false),
    /** On a graceful stop, NOTIFY followers so one takes over at once (off: they find out at their next retry). */
    wakeOnResign: z.boolean().default(true),
    eventRetentionDays: z.number().positive().default(7),
    // What the Lambda functions take too, defined once (../settings.ts): retention, outbound requests, targets, assignment reads.
    ...runtimeSettings,
    /** Who may ask what (guard.ts). Off (every caller may do everything) unless one way to prove identity is set. */
    auth: z
      .object({
        /** `--auth-tokens-file`: lines of `sha256:<hex> <actor> <scope,…>`. */
        tokensFile: z.string().min(1).optional(),
        /** `--oidc-*`: JWTs from an issuer. */
        oidc: oidcConfigSchema.optional(),
        /** `--signal-keys-file`: reporters that sign their signals (`<reporter> <secret>` a line). */
        signalKeysFile: z.string().min(1).optional(),
        /** Scopes of a caller proved by a client certificate (needs tls.clientCaFile). */
        certificateScopes: z.array(z.enum(SCOPES)).min(1).default(['read']),
        /** Serve beyond loopback with no authentication anyway (`--insecure-no-auth`): said on every start. */
        insecureNoAuth: z.boolean().default(false),
      })
      .strict()
      .default({ certificateScopes: ['read'], insecureNoAuth: false }),
    /** TLS on the node (`--tls-cert`, `--tls-key`); `clientCaFile` asks for and verifies client certificates. */
    tls: z
      .object({ certFile: z.string().min(1), keyFile: z.string().min(1), clientCaFile: z.string().min(1).optional() })
      .strict()
      .optional(),
    /** Host names this node answers to (`--allowed-hosts`); default: loopback names and its own, while authentication is off; `*`: any. */
    allowedHosts: z.array(z.string().min(1).max(255)).max(64).optional(),
    /** Proxies whose X-Forwarded-For is believed (`--trusted-proxies`): behind nginx, the rate per address is the client's. */
    trustedProxies: z.array(z.string().min(1).max(64)).max(64).default([]),
    /**
     * Requests per second per peer address and per credential (0: no limit); bursts of `burstSeconds` worth.
     * `perAddress`/`perCredential` hold for every request but the cheap reads (a rollout's traffic and
     * assignment), which have buckets of their own: a fleet of 10,000 processes sharing one read token and
     * refreshing every 5 s asks 2,000/s, from one address behind a proxy without `trustedProxies`.
     * Unset, a cheap-read bucket is never tighter than the general one: 5,000/s, or none when the
     * general limit is 0 (none).
     */
    rateLimit: z
      .object({
        perAddress: z.number().min(0).default(200),
        perCredential: z.number().min(0).default(100),
        burstSeconds: z.number().positive().max(60).default(2),
        cheapReadsPerAddress: z.number().min(0).optional(),
        cheapReadsPerCredential: z.number().min(0).optional(),
      })
      .strict()
      .default({ perAddress: 200, perCredential: 100, burstSeconds: 2 }),
  })
  .superRefine((c, ctx) => {
    if (c.elector === 'advisory-lock' && c.store.kind !== 'postgres')
      ctx.addIssue({
        code: 'custom',
        path: ['elector'],
        message: 'advisory-lock needs a PostgreSQL server (PGlite has one session; its locks exclude nothing)',
      });
    if (c.elector === 'lease' && !leaseCadenceHolds({ ttl: c.leaseTtlSeconds, renew: c.heartbeatIntervalSeconds, retry: c.electionIntervalSeconds })) {
      ctx.addIssue({
        code: 'custom',
        path: ['leaseTtlSeconds'],
        message: `needs lease TTL (${c.leaseTtlSeconds}) > heartbeat interval (${c.heartbeatIntervalSeconds}) > 1.2 × election interval (${c.electionIntervalSeconds})`,
      });
    } else if (!(c.leaseTtlSeconds > c.heartbeatIntervalSeconds)) {
      // Whatever the elector, run coordinators hold row leases with these timings.
      ctx.addIssue({
        code: 'custom',
        path: ['leaseTtlSeconds'],
        message: `needs lease TTL (${c.leaseTtlSeconds}) > heartbeat interval (${c.heartbeatIntervalSeconds}): run coordinators renew their leases at the heartbeat`,
      });
    }
    if (!(c.deadAfterSeconds > c.electionTimeoutSeconds))
      ctx.addIssue({ code: 'custom', path: ['deadAfterSeconds'], message: 'must exceed the election timeout' });
    if (!isLoopback(c.host) && !authEnabled(c) && !c.auth.insecureNoAuth) {
      ctx.addIssue({
        code: 'custom',
        path: ['host'],
        message: `${c.host} is reachable beyond this machine and no authentication is set: pass --auth-tokens-file or --oidc-issuer (or --insecure-no-auth to let anyone who reaches it do anything)`,
      });
    }
    if (c.tls?.clientCaFile === undefined && c.auth.certificateScopes.join() !== 'read')
      ctx.addIssue({ code: 'custom', path: ['auth', 'certificateScopes'], message: 'needs tls.clientCaFile (--tls-client-ca)' });
  });
export type NodeConfigInput = z.input<typeof nodeConfigSchema>;
export type NodeConfig = z.output<typeof nodeConfigSchema>;

/** An interface only this machine can reach. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/** Whether any way to prove identity is configured. */
export function authEnabled(c: Pick<NodeConfig, 'auth' | 'tls'>): boolean {
  return Boolean(c.auth.tokensFile || c.auth.oidc || c.auth.signalKeysFile || c.tls?.clientCaFile);
}

/** Where other nodes and proxies reach this node. */
export function apiUrlOf(c: NodeConfig): string {
  return c.apiUrl ?? `${c.tls ? 'https' : 'http'}://${c.host === '0.0.0.0' ? c.hostname : c.host}:${c.port}`;
}

/** The store a node opens. */
export function storeOf(c: NodeConfig): StoreConfig {
  if (c.store.kind === 'pglite') return { kind: 'pglite', dataDir: c.store.dataDir };
  // A node paused inside a transaction (SIGSTOP, a long GC pause) must not hold its row and
  // advisory locks past its lease: PostgreSQL ends such a session after one TTL, and the new
  // leader's retry of the same write (same Idempotency-Key) goes through instead of waiting.
  const idleLimitMs = Math.ceil(c.leaseTtlSeconds * 1000);
  return {
    kind: 'postgres',
    // Bounded waits: a store that stops answering must turn into errors (stale reads, step-down), not hung requests.
    connection: { connectionString: c.store.databaseUrl, max: 10, connectionTimeoutMillis: 3_000, query_timeout: 10_000 },
    onConnect: async (client) => {
      await client.query(`SET idle_in_transaction_session_timeout = ${idleLimitMs}`);
    },
  };
}
