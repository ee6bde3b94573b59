import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { own } from '../../own.js';

/**
 * A request from one of our clients (the `rollout` CLI, a worker asking a
 * node for work) to a control-plane node: over HTTPS with the operator's CA
 * when the node's certificate is not one the system trusts, with a bearer
 * token when the node asks for one. node:http rather than fetch, which
 * cannot be given a CA per request.
 */
export interface ClientTls {
  /** PEM: the CA the node's certificate chains to (`--ca-file`). */
  readonly ca?: string | Buffer;
}

export interface ClientAnswer {
  readonly status: number;
  header(name: string): string | null;
  readonly text: string;
}

export function send(
  url: URL,
  o: { method: string; headers: Record<string, string>; body?: string; timeoutMs: number; tls?: ClientTls; signal?: AbortSignal },
): Promise<ClientAnswer> {
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: o.method,
        headers: { ...o.headers, ...(o.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(o.body)) }) },
        signal: o.signal ? AbortSignal.any([o.signal, AbortSignal.timeout(o.timeoutMs)]) : AbortSignal.timeout(o.timeoutMs),
        ...(url.protocol === 'https:' && o.tls?.ca ? { ca: o.tls.ca } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            header: (name) => {
              const v = own(res.headers, name.toLowerCase());
              return v === undefined ? null : [v].flat().join(', ');
            },
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}
