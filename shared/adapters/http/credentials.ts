import { signatureHeader } from '../../auth/signature.js';
import { OutboundRefusedError, type Credential } from '../../outbound/policy.js';
import { MIN_REDACTED_LENGTH, redactSent } from '../../outbound/redact.js';
import type { SecretSource } from '../../outbound/secrets.js';
import type { ProviderResult } from '../../rollout/gates.js';

/**
 * The headers an operator's credential adds to one outbound request, and the
 * values it sent (pushed on `sent`) so that nothing we keep (a reading's
 * answer, an actuation record's reason) ever carries them.
 */
export interface CredentialUse {
  readonly secrets: SecretSource;
  readonly body: string;
  readonly headers: Record<string, string>;
  /** The kinds this caller takes; any other is refused naming `refusal`. */
  readonly accepts: readonly Credential['type'][];
  readonly refusal: string;
  readonly now: number;
  /** SigV4 signing of the request (Prometheus on AMP only). */
  readonly sigv4?: (region: string, headers: Record<string, string>) => Promise<Record<string, string>>;
}

export async function credentialHeaders(cred: Credential | null, use: CredentialUse, sent: string[]): Promise<Record<string, string>> {
  const { headers } = use;
  if (cred === null) return headers;
  if (!use.accepts.includes(cred.type)) throw new OutboundRefusedError(use.refusal);
  switch (cred.type) {
    case 'basic': {
      const password = await use.secrets.get(cred.password);
      const value = `Basic ${Buffer.from(`${cred.username}:${password}`).toString('base64')}`;
      sent.push(password, value.slice(6));
      return { ...headers, authorization: value };
    }
    case 'bearer': {
      const token = await use.secrets.get(cred.token);
      sent.push(token);
      return { ...headers, authorization: `Bearer ${token}` };
    }
    case 'hmac': {
      const secret = await use.secrets.get(cred.secret);
      sent.push(secret);
      return { ...headers, 'rollout-signature': signatureHeader(cred.keyId, secret, use.body, use.now) };
    }
    case 'sigv4': {
      if (!use.sigv4) throw new OutboundRefusedError(use.refusal);
      const signed = await use.sigv4(cred.region, headers);
      for (const [k, v] of Object.entries(signed)) if (/^(authorization|x-amz-security-token)$/i.test(k)) sent.push(v);
      return signed;
    }
  }
}

/** `text` with every value we sent cut out, in every encoding an answer could echo it in (outbound/redact.ts). */
export function cutSent(text: string, sent: readonly string[]): string {
  return redactSent(text, sent);
}

/** A reading with every value we sent cut from what it keeps. */
export function scrubbed(result: ProviderResult, sent: readonly string[]): ProviderResult {
  if (!sent.some((s) => s.length >= MIN_REDACTED_LENGTH)) return result;
  const out: Record<string, unknown> = { ...result, answer: cutSent(result.answer, sent) };
  if ('message' in result) out.message = cutSent(result.message, sent);
  return out as unknown as ProviderResult;
}
