import { request, type IncomingHttpHeaders } from 'node:http';

export interface Forwarded {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/** One request passed on to `upstream` as it came, its whole answer read back (for the test proxies in front of DynamoDB Local). */
export function forwardHttp(upstream: URL, headers: IncomingHttpHeaders, body: Buffer, method: string, path: string): Promise<Forwarded> {
  return new Promise((resolve, reject) => {
    const req = request({ host: upstream.hostname, port: upstream.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
