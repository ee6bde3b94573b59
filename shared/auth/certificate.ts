import type { Authenticator, Credentials, Identity } from './identity.js';
import type { Scope } from './scopes.js';

/**
 * A client certificate the TLS layer verified against the operator's CA:
 * the actor is `cert:<subject CN>`, with the scopes the operator gives
 * certificate holders. Tried after bearer tokens: a request that carries
 * both acts as the token says.
 */
export class CertificateAuthenticator implements Authenticator {
  constructor(private readonly scopes: ReadonlySet<Scope>) {}

  authenticate(c: Credentials): Promise<Identity | null> {
    if (!c.certificate) return Promise.resolve(null);
    return Promise.resolve({ actor: `cert:${c.certificate.subject.slice(0, 120)}`, scopes: this.scopes, via: 'certificate' });
  }
}
