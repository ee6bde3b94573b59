import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ApiRequest, ApiResponse } from '../../api/handler.js';
import { errorMessage, silentLogger, type Logger } from '../../log.js';

/**
 * The HTTP API on a plain node:http server: what a local node serves (the
 * same routes as the Lambda behind API Gateway). The actor is whoever the
 * `x-rollout-actor` header names (a local node trusts its network; put it
 * behind a proxy that sets the header from real authentication otherwise).
 */
export const MAX_BODY_BYTES = 1_048_576;

/** A request as a local node sees it: the API's, plus the headers (lower-cased). */
export interface HttpRequest extends ApiRequest {
  readonly headers: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
}

/** A body sent as it is (HTML, Prometheus text) rather than as JSON. */
export class RawBody {
  constructor(
    readonly text: string,
    readonly contentType: string,
  ) {}
}

function readBody(req: IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(Object.assign(new Error(`request body over ${MAX_BODY_BYTES} bytes`), { status: 413 }));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(chunks.length ? Buffer.concat(chunks).toString('utf8') : null));
    req.on('error', reject);
  });
}

export async function serveApi(handle: (req: HttpRequest) => Promise<ApiResponse>, options: { host?: string; port?: number; logger?: Logger } = {}): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const logger = options.logger ?? silentLogger;
  const server = createServer((req, res) => {
    void (async () => {
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        if (body instanceof RawBody) res.writeHead(status, { 'content-type': body.contentType, ...headers }).end(body.text);
        else res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
      };
      try {
        const url = new URL(req.url ?? '/', 'http://local');
        const body = await readBody(req);
        const actor = [req.headers['x-rollout-actor']].flat()[0] ?? 'local';
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, [v].flat().join(', ')]));
        const out = await handle({ method: req.method ?? 'GET', path: url.pathname, body, actor, headers, query: url.searchParams });
        send(out.status, out.body, { ...out.headers });
      } catch (err) {
        const status = (err as { status?: number }).status ?? 500;
        if (status >= 500) logger.error('request failed', { method: req.method, path: req.url, error: errorMessage(err) });
        send(status, { error: status >= 500 ? 'internal error' : errorMessage(err) });
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(':') ? `[${address}]` : address}:${port}`,
    server,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
