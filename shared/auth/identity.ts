import type { Scope } from './scopes.js';

/** Who a request comes from, as its credential says: the actor recorded with every write it makes. */
export interface Identity {
  readonly actor: string;
  readonly scopes: ReadonlySet<Scope>;
  /** How it was established. */
  readonly via: 'token' | 'oidc' | 'certificate' | 'signature' | 'none';
}

/** What a request offers to prove who it is. */
export interface Credentials {
  /** The token after `Authorization: Bearer `. */
  readonly bearer: string | null;
  /** A client certificate the TLS layer verified. */
  readonly certificate: { readonly subject: string } | null;
  /** A signed request: its Rollout-Signature header and the body it signs. */
  readonly signature?: { readonly header: string; readonly body: string } | null;
}

/** No credential the authenticator knows; `challenge` goes in WWW-Authenticate. */
export class Unauthenticated extends Error {
  override readonly name = 'Unauthenticated';
}

/**
 * One way to establish identity. `authenticate` answers the identity, null
 * when the credentials are not of its kind (the next authenticator tries),
 * or throws Unauthenticated when they are of its kind and wrong (an expired
 * JWT, an unknown token): a wrong credential is never passed on.
 */
export interface Authenticator {
  authenticate(c: Credentials): Promise<Identity | null>;
}

/** Tries each authenticator in turn. */
export async function identify(authenticators: readonly Authenticator[], c: Credentials): Promise<Identity | null> {
  for (const a of authenticators) {
    const id = await a.authenticate(c);
    if (id) return id;
  }
  return null;
}
