import type { NodeConfigInput } from '../node/config.js';
import { errorMessage } from '../../log.js';
import type { OptionSpec } from './command-spec.js';
import { UsageError } from './errors.js';
import { readJsonFile } from './io.js';
import { nonNegative } from './parsers.js';

/** The options a node takes on what its requests may reach and who may ask (start and serve alike), before its own. */
export const TRUST_OPTIONS: readonly OptionSpec[] = [
  {
    flags: '--outbound-config <file.json>',
    description: 'what a spec may make this node request: allowed origins and the credentials bound to them (none by default)',
    env: 'ROLLOUT_OUTBOUND_CONFIG',
  },
  {
    flags: '--targets-config <file.json>',
    description: 'the targets rollouts may move, by name: nginx includes, Lambda aliases, ALB rules (none by default)',
    env: 'ROLLOUT_TARGETS_CONFIG',
  },
  {
    flags: '--auth-tokens-file <file>',
    description: 'bearer tokens this node accepts: lines of "sha256:<hex> <actor> <scope,scope…>" (see rollout auth token)',
    env: 'ROLLOUT_AUTH_TOKENS_FILE',
  },
  { flags: '--oidc-issuer <url>', description: 'accept JWTs from this OIDC issuer (keys from its discovery document)', env: 'ROLLOUT_OIDC_ISSUER' },
  { flags: '--oidc-audience <aud>', description: 'the audience the JWTs must name', env: 'ROLLOUT_OIDC_AUDIENCE' },
  { flags: '--oidc-jwks-url <url>', description: "the issuer's JWKS, when not from discovery", env: 'ROLLOUT_OIDC_JWKS_URL' },
  { flags: '--oidc-actor-claim <claim>', description: 'the claim that names the actor', env: 'ROLLOUT_OIDC_ACTOR_CLAIM', default: 'sub' },
  {
    flags: '--oidc-scopes-claim <claim>',
    description: 'the claim that carries scopes (or groups, with --oidc-scope-map)',
    env: 'ROLLOUT_OIDC_SCOPES_CLAIM',
    default: 'scope',
  },
  {
    flags: '--oidc-runs-claim <claim>',
    description: "the claim that binds a worker's token to runs (ids, or *)",
    env: 'ROLLOUT_OIDC_RUNS_CLAIM',
    default: 'rollout_runs',
  },
  {
    flags: '--oidc-worker-claim <claim>',
    description: "the claim that binds a worker's token to a worker id (or a prefix ending in *)",
    env: 'ROLLOUT_OIDC_WORKER_CLAIM',
    default: 'rollout_worker',
  },
  { flags: '--oidc-scope-map <json>', description: 'claim values to scopes, e.g. {"platform-admins":["read","admin"]}', env: 'ROLLOUT_OIDC_SCOPE_MAP' },
  {
    flags: '--signal-keys-file <file>',
    description: 'reporters that sign their signals instead of holding a token: lines of "<reporter> <secret>"',
    env: 'ROLLOUT_SIGNAL_KEYS_FILE',
  },
  { flags: '--tls-cert <file>', description: 'serve HTTPS with this certificate (PEM)', env: 'ROLLOUT_TLS_CERT' },
  { flags: '--tls-key <file>', description: "the certificate's private key (PEM)", env: 'ROLLOUT_TLS_KEY' },
  {
    flags: '--tls-client-ca <file>',
    description: 'ask for client certificates and accept those this CA signed; the actor is cert:<subject CN>',
    env: 'ROLLOUT_TLS_CLIENT_CA',
  },
  { flags: '--tls-client-scopes <scopes>', description: 'scopes of a client-certificate caller', env: 'ROLLOUT_TLS_CLIENT_SCOPES', default: 'read' },
  {
    flags: '--allowed-hosts <names>',
    description: 'Host names this node answers to, comma-separated ("*": any); default: loopback and its own names while authentication is off',
    env: 'ROLLOUT_ALLOWED_HOSTS',
  },
  {
    flags: '--rate-limit <rps>',
    description: 'requests per second per peer address, but for traffic and assignment reads (0: none; default 200)',
    parser: (v) => nonNegative('--rate-limit', v),
    env: 'ROLLOUT_RATE_LIMIT',
  },
  {
    flags: '--rate-limit-per-credential <rps>',
    description: 'requests per second per credential, but for traffic and assignment reads (0: none; default 100)',
    parser: (v) => nonNegative('--rate-limit-per-credential', v),
    env: 'ROLLOUT_RATE_LIMIT_PER_CREDENTIAL',
  },
  {
    flags: '--rate-limit-cheap-reads <rps>',
    description: "a rollout's traffic and assignment reads per second per peer address (0: none; default 5000, none when --rate-limit is 0)",
    parser: (v) => nonNegative('--rate-limit-cheap-reads', v),
    env: 'ROLLOUT_RATE_LIMIT_CHEAP_READS',
  },
  {
    flags: '--rate-limit-cheap-reads-per-credential <rps>',
    description: "a rollout's traffic and assignment reads per second per credential (0: none; default 5000, none when --rate-limit-per-credential is 0)",
    parser: (v) => nonNegative('--rate-limit-cheap-reads-per-credential', v),
    env: 'ROLLOUT_RATE_LIMIT_CHEAP_READS_PER_CREDENTIAL',
  },
  {
    flags: '--trusted-proxies <addresses>',
    description: 'proxies whose X-Forwarded-For names the client, comma-separated (the shipped nginx sets it)',
    env: 'ROLLOUT_TRUSTED_PROXIES',
  },
  {
    flags: '--insecure-no-auth',
    description: 'serve beyond loopback with no authentication: anyone who reaches the node may do anything',
    env: 'ROLLOUT_INSECURE_NO_AUTH',
  },
];

export interface TrustOpts {
  outboundConfig?: string;
  targetsConfig?: string;
  authTokensFile?: string;
  oidcIssuer?: string;
  oidcAudience?: string;
  oidcJwksUrl?: string;
  oidcActorClaim: string;
  oidcScopesClaim: string;
  oidcRunsClaim: string;
  oidcWorkerClaim: string;
  oidcScopeMap?: string;
  signalKeysFile?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsClientCa?: string;
  tlsClientScopes: string;
  allowedHosts?: string;
  rateLimit?: number;
  rateLimitPerCredential?: number;
  rateLimitCheapReads?: number;
  rateLimitCheapReadsPerCredential?: number;
  trustedProxies?: string;
  insecureNoAuth?: boolean | string;
}

const TRUST_KEYS = [
  'outboundConfig',
  'targetsConfig',
  'authTokensFile',
  'oidcIssuer',
  'oidcAudience',
  'oidcJwksUrl',
  'oidcActorClaim',
  'oidcScopesClaim',
  'oidcRunsClaim',
  'oidcWorkerClaim',
  'oidcScopeMap',
  'signalKeysFile',
  'tlsCert',
  'tlsKey',
  'tlsClientCa',
  'tlsClientScopes',
  'allowedHosts',
  'rateLimit',
  'rateLimitPerCredential',
  'rateLimitCheapReads',
  'rateLimitCheapReadsPerCredential',
  'trustedProxies',
  'insecureNoAuth',
] as const;

const flag = (v: boolean | string | undefined) => v === true || v === 'true' || v === '1';

/** The rate limits given on the command line; the rest keep the node's defaults. */
function rateLimitConfig(o: TrustOpts): Pick<NodeConfigInput, 'rateLimit'> {
  const given = {
    ...(o.rateLimit !== undefined ? { perAddress: Number(o.rateLimit) } : {}),
    ...(o.rateLimitPerCredential !== undefined ? { perCredential: Number(o.rateLimitPerCredential) } : {}),
    ...(o.rateLimitCheapReads !== undefined ? { cheapReadsPerAddress: Number(o.rateLimitCheapReads) } : {}),
    ...(o.rateLimitCheapReadsPerCredential !== undefined ? { cheapReadsPerCredential: Number(o.rateLimitCheapReadsPerCredential) } : {}),
  };
  return Object.keys(given).length > 0 ? { rateLimit: given } : {};
}

/** The node configuration the trust options give; checked, field by field, by the node's own schema. */
export function trustConfig(o: TrustOpts): Pick<NodeConfigInput, 'outbound' | 'auth' | 'tls' | 'allowedHosts' | 'rateLimit' | 'trustedProxies'> {
  if ((o.tlsCert === undefined) !== (o.tlsKey === undefined)) throw new UsageError('--tls-cert and --tls-key go together');
  if (o.oidcIssuer && !o.oidcAudience) throw new UsageError('--oidc-issuer needs --oidc-audience: the audience the tokens must be meant for');
  let scopeMap: unknown;
  if (o.oidcScopeMap) {
    try {
      scopeMap = JSON.parse(o.oidcScopeMap);
    } catch (err) {
      throw new UsageError(`--oidc-scope-map is not JSON: ${errorMessage(err)}`);
    }
  }
  return {
    ...(o.outboundConfig ? { outbound: readJsonFile(o.outboundConfig) as NodeConfigInput['outbound'] } : {}),
    ...(o.targetsConfig ? { targets: readJsonFile(o.targetsConfig) as NodeConfigInput['targets'] } : {}),
    auth: {
      // Paths: the node reads them, and names them in its errors.
      ...(o.authTokensFile ? { tokensFile: o.authTokensFile } : {}),
      ...(o.signalKeysFile ? { signalKeysFile: o.signalKeysFile } : {}),
      ...(o.oidcIssuer
        ? {
            oidc: {
              issuer: o.oidcIssuer,
              audience: o.oidcAudience!,
              actorClaim: o.oidcActorClaim,
              scopesClaim: o.oidcScopesClaim,
              runsClaim: o.oidcRunsClaim,
              workerClaim: o.oidcWorkerClaim,
              ...(o.oidcJwksUrl ? { jwksUrl: o.oidcJwksUrl } : {}),
              ...(scopeMap ? { scopeMap: scopeMap as Record<string, never[]> } : {}),
            },
          }
        : {}),
      certificateScopes: o.tlsClientScopes.split(',').map((x) => x.trim()) as never[],
      insecureNoAuth: flag(o.insecureNoAuth),
    },
    ...(o.tlsCert && o.tlsKey ? { tls: { certFile: o.tlsCert, keyFile: o.tlsKey, ...(o.tlsClientCa ? { clientCaFile: o.tlsClientCa } : {}) } } : {}),
    ...(o.trustedProxies
      ? {
          trustedProxies: o.trustedProxies
            .split(',')
            .map((h) => h.trim())
            .filter(Boolean),
        }
      : {}),
    ...(o.allowedHosts
      ? {
          allowedHosts: o.allowedHosts
            .split(',')
            .map((h) => h.trim())
            .filter(Boolean),
        }
      : {}),
    ...rateLimitConfig(o),
  };
}

/** `o` without the trust options (what the command itself takes). */
export function withoutTrust<T extends TrustOpts>(o: T): Omit<T, (typeof TRUST_KEYS)[number]> {
  const out = { ...o } as Record<string, unknown>;
  for (const k of TRUST_KEYS) delete out[k];
  return out as Omit<T, (typeof TRUST_KEYS)[number]>;
}
