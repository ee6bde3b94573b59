import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { OutboundRefusedError, type OutboundPolicy } from '../../outbound/policy.js';

/**
 * Requests made on a spec's behalf (gate reads; later webhooks and
 * actuators), under the operator's OutboundPolicy:
 *
 * - the URL's origin must be allow-listed (refused before any lookup);
 * - the host is resolved once, every address it resolved to is checked, and
 *   the socket connects to those checked addresses (node:http's `lookup`
 *   hook), so a DNS answer that changes between check and connect (DNS
 *   rebinding) cannot slip a forbidden address in;
 * - redirects are not followed; proxies from the environment are not used;
 * - the answer is streamed and cut off past `maxAnswerBytes` (64 KiB);
 * - the caller's signal bounds the whole exchange.
 */
export const MAX_ANSWER_BYTES = 65_536;

export interface OutboundRequest {
  readonly url: string;
  readonly method: 'GET' | 'POST';
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly signal: AbortSignal;
}

export interface OutboundAnswer {
  readonly status: number;
  readonly statusText: string;
  readonly text: string;
}

/** The port a provider asks through: a test may count or hold its requests. */
export interface OutboundClient {
  request(req: OutboundRequest): Promise<OutboundAnswer>;
}

export class AnswerTooLargeError extends Error {
  override readonly name = 'AnswerTooLargeError';
}

export class OutboundHttp implements OutboundClient {
  private readonly maxAnswerBytes: number;
  private readonly resolve: typeof dnsLookup;

  constructor(
    readonly policy: OutboundPolicy,
    o: { maxAnswerBytes?: number; lookup?: typeof dnsLookup } = {},
  ) {
    this.maxAnswerBytes = o.maxAnswerBytes ?? MAX_ANSWER_BYTES;
    this.resolve = o.lookup ?? dnsLookup;
  }

  request(req: OutboundRequest): Promise<OutboundAnswer> {
    const refused = this.policy.refuseUrl(req.url, 'url');
    if (refused) return Promise.reject(new OutboundRefusedError(refused));
    const url = new URL(req.url);
    const options: RequestOptions = {
      method: req.method,
      headers: { ...req.headers, ...(req.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(req.body)) }) },
      lookup: this.checkedLookup(url),
      signal: req.signal,
      // One request per connection: a kept-alive socket would outlive the check made for it.
      agent: false,
    };
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<OutboundAnswer>((resolve, reject) => {
      const r = send(url, options, (res) => void this.read(res, (err) => r.destroy(err)).then(resolve, reject));
      r.on('error', reject);
      r.end(req.body);
    });
  }

  /** Resolve, check every address, and hand the connection exactly the addresses checked. */
  private checkedLookup(url: URL): LookupFunction {
    return (hostname, options, callback) => {
      this.resolve(hostname, { all: true, ...(options.family ? { family: options.family } : {}) }, (err, addresses: LookupAddress[]) => {
        if (err) return callback(err, '', 0);
        for (const a of addresses) {
          const why = this.policy.refuseAddress(url, a.address);
          if (why) return callback(new OutboundRefusedError(why), '', 0);
        }
        if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
        const first = addresses[0];
        if (!first) return callback(new Error(`${hostname}: no address`), '', 0);
        callback(null, first.address, first.family);
      });
    };
  }

  private read(res: IncomingMessage, abort: (err: Error) => void): Promise<OutboundAnswer> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > this.maxAnswerBytes) {
          const err = new AnswerTooLargeError(`answer over ${this.maxAnswerBytes} bytes; not read further`);
          abort(err);
          reject(err);
          return;
        }
        chunks.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
      res.on('aborted', () => reject(new Error('answer cut off')));
    });
  }
}
