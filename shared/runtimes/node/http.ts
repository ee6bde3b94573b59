import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { ApiRequest, ApiResponse } from '../../api/handler.js';
import { parseTarget, TargetError } from '../../api/contract.js';
import { errorMessage, silentLogger, type Logger } from '../../log.js';

/**
 * The HTTP API on a plain node:http (or node:https) server: what a local node
 * serves (the same routes as the Lambda behind API Gateway). This layer
 * bounds what a connection can hold before any handler runs:
 *
 *   headers     in within 10 s (checked every second, so a client trickling a
 *               header line every few seconds is cut off, not kept for good)
 *   request     in within 30 s; a keep-alive connection idles 5 s
 *   connections at most 1,024 at once (more are closed on accept)
 *   body        at most 1 MiB (413, written before the connection closes;
 *               a Content-Length over it is refused before a byte is read),
 *               and valid UTF-8 (400)
 *
 * Who is asking, and what they may do, is the handler's (guard.ts).
 */
export const MAX_BODY_BYTES = 1_048_576;

export interface HttpLimits {
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxConnections: number;
  readonly maxBodyBytes: number;
  readonly maxHeaderBytes: number;
}

export const HTTP_LIMITS: HttpLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 1_024,
  maxBodyBytes: MAX_BODY_BYTES,
  maxHeaderBytes: 16_384,
};

/** TLS on the node: its certificate, and optionally client certificates verified against `clientCa`. */
export interface TlsFiles {
  readonly cert: string | Buffer;
  readonly key: string | Buffer;
  readonly clientCa?: string | Buffer;
}

/** A verified client certificate: who it names. */
export interface ClientCertificate {
  readonly subject: string;
  readonly fingerprint256: string;
}

/** A request as a local node sees it: the API's, plus the headers (lower-cased) and where it came from. */
export interface HttpRequest extends ApiRequest {
  readonly headers: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  /** The peer's address (the proxy's, behind one). */
  readonly remoteAddress: string;
  /** A client certificate the TLS layer verified against the configured CA; null otherwise. */
  readonly clientCertificate: ClientCertificate | null;
  /** Whether the connection is TLS. */
  readonly secure: boolean;
}

/** A body sent as it is (HTML, Prometheus text) rather than as JSON. */
export class RawBody {
  constructor(
    readonly text: string,
    readonly contentType: string,
  ) {}
}

export class RequestRefused extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The request target's path, in its one spelling (contract.ts parseTarget: a
 * doubled or trailing slash, a dot segment, a malformed escape… is a 400
 * naming it, never normalised), and its query as WHATWG URL parsing reads it.
 * The guard, the router and the handlers all see this path.
 */
export function requestTarget(raw: string): { pathname: string; searchParams: URLSearchParams } {
  try {
    const { path, query } = parseTarget(raw);
    return { pathname: path, searchParams: new URLSearchParams(query) };
  } catch (err) {
    if (err instanceof TargetError) throw new RequestRefused(400, err.message);
    throw err;
  }
}

function readBody(req: IncomingMessage, max: number): Promise<string | null> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > max) return Promise.reject(new RequestRefused(413, `request body over ${max} bytes`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      if (over) return; // drained, not kept: the answer is written once the client stops sending or the timeout ends it
      size += c.length;
      if (size > max) {
        over = true;
        chunks.length = 0;
        reject(new RequestRefused(413, `request body over ${max} bytes`));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (over) return;
      if (!chunks.length) return resolve(null);
      try {
        resolve(utf8.decode(Buffer.concat(chunks)));
      } catch {
        reject(new RequestRefused(400, 'request body is not valid UTF-8'));
      }
    });
    req.on('error', reject);
  });
}

function clientCertificate(req: IncomingMessage): ClientCertificate | null {
  const socket = req.socket as TLSSocket;
  if (typeof socket.getPeerCertificate !== 'function' || !socket.authorized) return null;
  const cert = socket.getPeerCertificate();
  if (!cert || !cert.subject) return null;
  const cn = [cert.subject.CN].flat()[0];
  return cn ? { subject: cn, fingerprint256: cert.fingerprint256 } : null;
}

export async function serveApi(
  handle: (req: HttpRequest) => Promise<ApiResponse>,
  options: { host?: string; port?: number; logger?: Logger; limits?: Partial<HttpLimits>; tls?: TlsFiles } = {},
): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const logger = options.logger ?? silentLogger;
  const limits = { ...HTTP_LIMITS, ...options.limits };
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        if (res.headersSent) return;
        if (status === 304) return void res.writeHead(status, headers).end(); // no body, by definition
        const [type, text] = body instanceof RawBody ? [body.contentType, body.text] : ['application/json', JSON.stringify(body)];
        // A length, not chunked encoding: one write per answer instead of a body and a terminating chunk.
        res.writeHead(status, { 'content-type': type, 'content-length': String(Buffer.byteLength(text)), ...headers }).end(text);
      };
      try {
        const { pathname, searchParams } = requestTarget(req.url ?? '/');
        // No length and no chunks: no body to wait for (most reads).
        const body =
          req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined ? null : await readBody(req, limits.maxBodyBytes);
        // Node joins repeated request headers into one string, all but set-cookie (an array): only then is a copy needed.
        let headers = req.headers as Record<string, string>;
        if (req.headers['set-cookie'] !== undefined) headers = { ...headers, 'set-cookie': req.headers['set-cookie'].join(', ') };
        // The client gone before its answer (a closed connection): what waits on its behalf stops.
        const gone = new AbortController();
        res.once('close', () => {
          if (!res.writableFinished) gone.abort();
        });
        const out = await handle({
          signal: gone.signal,
          method: req.method ?? 'GET',
          path: pathname,
          body,
          // Who asks is the guard's to say (guard.ts), never a header's.
          actor: 'anonymous',
          headers,
          query: searchParams,
          remoteAddress: req.socket.remoteAddress ?? '',
          clientCertificate: options.tls ? clientCertificate(req) : null,
          secure: Boolean(options.tls),
        });
        send(out.status, out.body, out.headers);
      } catch (err) {
        if (err instanceof RequestRefused) {
          // Written, then the connection closed: the rest of an oversize body is not read.
          send(err.status, { error: err.message }, { connection: 'close' });
          if (err.status === 413) res.once('finish', () => req.socket.destroySoon());
          return;
        }
        const status = (err as { status?: number }).status ?? 500;
        if (status < 500) return send(status, { error: errorMessage(err) });
        // The caller's X-Request-Id when it sent a sane one: the answer and the log line carry the same id, to quote.
        const given = req.headers['x-request-id'];
        const requestId = typeof given === 'string' && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
        logger.error('request failed', { requestId, method: req.method, path: req.url, error: errorMessage(err) });
        send(status, { error: 'internal error', requestId });
      }
    })();
  };
  const serverOptions: ServerOptions = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    maxHeaderSize: limits.maxHeaderBytes,
    // How often the two timeouts above are checked (Node's default is 30 s).
    connectionsCheckingInterval: 1_000,
    requireHostHeader: true,
  };
  const server: Server = options.tls
    ? createTlsServer(
        {
          ...serverOptions,
          cert: options.tls.cert,
          key: options.tls.key,
          ...(options.tls.clientCa ? { ca: options.tls.clientCa, requestCert: true, rejectUnauthorized: false } : {}),
        },
        listener,
      )
    : createServer(serverOptions, listener);
  server.maxConnections = limits.maxConnections;
  server.maxRequestsPerSocket = 1_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `${options.tls ? 'https' : 'http'}://${address.includes(':') ? `[${address}]` : address}:${port}`,
    server,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeIdleConnections();
      }),
  };
}
