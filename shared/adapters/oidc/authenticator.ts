import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';
import { z } from 'zod';
import { parseConfig } from '../../config.js';
import { BindingError, runsBinding, workerBinding } from '../../auth/bindings.js';
import { Unauthenticated, type Authenticator, type Credentials, type Identity } from '../../auth/identity.js';
import { isScope, SCOPES, type Scope } from '../../auth/scopes.js';
import { own } from '../../own.js';

/**
 * OIDC bearer tokens: JWTs verified against the issuer's published keys
 * (JWKS, found through the issuer's discovery document unless given). Checks
 * the signature (asymmetric algorithms only), `iss`, `aud`, and `exp` / `nbf`
 * with a bounded clock tolerance. A key the cached set does not have (the
 * issuer rotated) makes the set be fetched again, at most once per
 * `jwksCooldownSeconds`.
 *
 * The actor is a claim (`sub` by default), prefixed with nothing; scopes
 * come from a claim (`scope`: a space-separated string or an array) whose
 * values are our scope names, or are mapped to them by `scopeMap` (an IdP
 * group → the scopes it grants).
 *
 * A worker's token is bound (auth/bindings.ts) by two claims: `runsClaim`
 * (`rollout_runs`: the run ids it may ask work for, an array or a
 * space/comma-separated string, `*` for any) and `workerClaim`
 * (`rollout_worker`: the worker id it may ask as, or a prefix ending in
 * `*`). A token without them is unbound (any run, any worker), as a tokens
 * file line without `runs=`; one whose claim is malformed is refused, never
 * taken as unbound. An empty runs claim binds to no run.
 */
export const oidcConfigSchema = z
  .object({
    issuer: z.string().url().max(2_048),
    audience: z.string().min(1).max(512),
    /** Default: the `jwks_uri` of `<issuer>/.well-known/openid-configuration`. */
    jwksUrl: z.string().url().max(2_048).optional(),
    actorClaim: z.string().min(1).max(128).default('sub'),
    scopesClaim: z.string().min(1).max(128).default('scope'),
    scopeMap: z.record(z.string().min(1).max(256), z.array(z.enum(SCOPES)).min(1)).optional(),
    /** The claim naming the runs a worker's token may ask work for. */
    runsClaim: z.string().min(1).max(128).default('rollout_runs'),
    /** The claim naming the worker id (or `prefix*`) a worker's token may ask as. */
    workerClaim: z.string().min(1).max(128).default('rollout_worker'),
    clockToleranceSeconds: z.number().int().min(0).max(300).default(60),
    jwksCooldownSeconds: z.number().min(0).max(3_600).default(30),
  })
  .strict();
export type OidcConfigInput = z.input<typeof oidcConfigSchema>;

const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
/** Longer than any real ID or access token; bounded before any parsing. */
const MAX_JWT_CHARS = 16_384;

export class OidcAuthenticator implements Authenticator {
  private readonly c: z.output<typeof oidcConfigSchema>;
  private keys: ReturnType<typeof createRemoteJWKSet> | undefined;

  constructor(config: OidcConfigInput) {
    this.c = parseConfig('oidc', oidcConfigSchema, config);
  }

  private async keySet(): Promise<ReturnType<typeof createRemoteJWKSet>> {
    if (this.keys) return this.keys;
    let url = this.c.jwksUrl;
    if (!url) {
      const discovery = `${this.c.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
      const res = await fetch(discovery, { signal: AbortSignal.timeout(5_000), redirect: 'error' });
      if (!res.ok) throw new Error(`${discovery}: HTTP ${res.status}`);
      const doc = (await res.json()) as { jwks_uri?: unknown };
      if (typeof doc.jwks_uri !== 'string') throw new Error(`${discovery}: no jwks_uri`);
      url = doc.jwks_uri;
    }
    this.keys = createRemoteJWKSet(new URL(url), { cooldownDuration: this.c.jwksCooldownSeconds * 1000, timeoutDuration: 5_000 });
    return this.keys;
  }

  async authenticate(c: Credentials): Promise<Identity | null> {
    const token = c.bearer;
    // A JWT is three base64url parts; anything else is another authenticator's.
    if (token === null || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token)) return null;
    if (token.length > MAX_JWT_CHARS) throw new Unauthenticated(`token over ${MAX_JWT_CHARS} characters`);
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, await this.keySet(), {
        issuer: this.c.issuer,
        audience: this.c.audience,
        clockTolerance: this.c.clockToleranceSeconds,
        algorithms: ALGORITHMS,
        requiredClaims: ['exp'],
      }));
    } catch (err) {
      throw new Unauthenticated(reason(err));
    }
    const actor = own(payload, this.c.actorClaim);
    if (typeof actor !== 'string' || !actor || actor.length > 256) throw new Unauthenticated(`token has no ${this.c.actorClaim} claim to name the actor`);
    return { actor, scopes: this.scopesOf(own(payload, this.c.scopesClaim)), via: 'oidc', ...this.bindingOf(payload) };
  }

  /** The runs and worker the token's claims bind it to; a claim that is there and malformed refuses the token. */
  private bindingOf(payload: JWTPayload): Pick<Identity, 'runs' | 'worker'> {
    const runsClaim = own(payload, this.c.runsClaim);
    const workerClaim = own(payload, this.c.workerClaim);
    try {
      let runs: ReadonlySet<string> | 'any' = 'any';
      if (runsClaim !== undefined) {
        const values =
          typeof runsClaim === 'string'
            ? runsClaim.split(/[\s,]+/).filter(Boolean)
            : Array.isArray(runsClaim) && runsClaim.every((v) => typeof v === 'string')
              ? runsClaim
              : null;
        if (values === null) throw new BindingError('runs: an array of run ids or a space-separated string');
        // Present and empty: bound to no run (never read as unbound).
        runs = values.length ? runsBinding(values) : new Set();
      }
      if (workerClaim !== undefined && typeof workerClaim !== 'string') throw new BindingError('worker: a string');
      return { runs, worker: workerClaim === undefined ? null : workerBinding(workerClaim) };
    } catch (err) {
      if (!(err instanceof BindingError)) throw err;
      const claim = err.message.startsWith('runs') ? this.c.runsClaim : this.c.workerClaim;
      throw new Unauthenticated(`token claim ${claim} is not acceptable (${err.message})`);
    }
  }

  private scopesOf(claim: unknown): ReadonlySet<Scope> {
    const values = typeof claim === 'string' ? claim.split(/\s+/) : Array.isArray(claim) ? claim.filter((v): v is string => typeof v === 'string') : [];
    const out = new Set<Scope>();
    for (const v of values.slice(0, 256)) {
      const mapped = this.c.scopeMap ? own(this.c.scopeMap, v) : isScope(v) ? [v] : undefined;
      for (const s of mapped ?? []) out.add(s);
    }
    return out;
  }
}

/** What a refused token did wrong, in words safe to answer with (never the token, never a key). */
function reason(err: unknown): string {
  if (err instanceof errors.JWTExpired) return 'token expired';
  if (err instanceof errors.JWTClaimValidationFailed) return `token claim ${err.claim} is not acceptable (${err.reason})`;
  if (err instanceof errors.JWKSNoMatchingKey) return 'token signed with a key the issuer does not publish';
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'token signature does not verify';
  if (err instanceof errors.JOSEAlgNotAllowed) return 'token signed with an algorithm that is not accepted';
  if (err instanceof errors.JWTInvalid || err instanceof errors.JWSInvalid) return 'token is not a valid JWT';
  if (err instanceof errors.JWKSTimeout) return "issuer's keys could not be fetched in time";
  return 'token could not be verified';
}
