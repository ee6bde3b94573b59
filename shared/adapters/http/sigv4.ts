import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { createHash, createHmac } from 'node:crypto';

/**
 * SigV4 signing of a plain HTTP request with the usual AWS credential chain:
 * the CLI signs its calls to the deployed API (`execute-api`), a Prometheus
 * gate signs its queries to Amazon Managed Service for Prometheus (`aps`).
 */

type Data = string | ArrayBuffer | ArrayBufferView;
const bytes = (d: Data): string | Uint8Array =>
  typeof d === 'string' ? d : d instanceof ArrayBuffer ? new Uint8Array(d) : new Uint8Array(d.buffer, d.byteOffset, d.byteLength);

/** SHA-256 (and HMAC-SHA-256 with a key) in the shape the signer wants, from node:crypto. */
class Sha256 {
  private readonly h;
  constructor(secret?: Data) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: Data): void {
    this.h.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.h.digest()));
  }
}

let chain: AwsCredentialIdentityProvider | undefined;

/** `headers` plus the signature headers for this request (they must include `host`). */
export async function sigv4Headers(
  o: { service: string; region: string; credentials?: AwsCredentialIdentityProvider },
  req: { method: string; url: URL; headers: Record<string, string>; body?: string },
): Promise<Record<string, string>> {
  // One credential chain per process: it caches what it resolved (and refreshes before expiry).
  const credentials = o.credentials ?? (chain ??= defaultProvider());
  const signer = new SignatureV4({ service: o.service, region: o.region, credentials, sha256: Sha256 });
  const { url } = req;
  const signed = await signer.sign({
    method: req.method,
    protocol: url.protocol,
    hostname: url.hostname,
    ...(url.port ? { port: Number(url.port) } : {}),
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    headers: { ...req.headers, host: url.host },
    ...(req.body !== undefined ? { body: req.body } : {}),
  });
  return signed.headers;
}
