import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';
import { z } from 'zod';
import { parseConfig } from '../../config.js';
import { Unauthenticated, type Authenticator, type Credentials, type Identity } from '../../auth/identity.js';
import { isScope, SCOPES, type Scope } from '../../auth/scopes.js';

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
      ({ payload } = await jwtVerify(token, await this.keySet(), { issuer: this.c.issuer, audience: this.c.audience, clockTolerance: this.c.clockToleranceSeconds, algorithms: ALGORITHMS, requiredClaims: ['exp'] }));
    } catch (err) {
      throw new Unauthenticated(reason(err));
    }
    const actor = payload[this.c.actorClaim];
    if (typeof actor !== 'string' || !actor || actor.length > 256) throw new Unauthenticated(`token has no ${this.c.actorClaim} claim to name the actor`);
    return { actor, scopes: this.scopesOf(payload[this.c.scopesClaim]), via: 'oidc' };
  }

  private scopesOf(claim: unknown): ReadonlySet<Scope> {
    const values = typeof claim === 'string' ? claim.split(/\s+/) : Array.isArray(claim) ? claim.filter((v): v is string => typeof v === 'string') : [];
    const out = new Set<Scope>();
    for (const v of values.slice(0, 256)) {
      const mapped = this.c.scopeMap ? (Object.hasOwn(this.c.scopeMap, v) ? this.c.scopeMap[v] : undefined) : isScope(v) ? [v] : undefined;
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
