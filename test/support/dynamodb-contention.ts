import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { forwardHttp, type Forwarded } from './http-forward.js';
import { closeNow, listenOnLoopback, withBody } from './local-server.js';

/**
 * DynamoDB Local serialises every request, so it never cancels a transaction
 * for a conflict (640 concurrent TransactWriteItems on one item: no
 * TransactionConflict). DynamoDB does. This HTTP proxy in front of DynamoDB
 * Local applies DynamoDB's two write-conflict rules to what it forwards, and
 * answers as DynamoDB answers:
 *
 * - an item of a TransactWriteItems is part of another ongoing one → the
 *   newcomer is cancelled (TransactionCanceledException, reason
 *   `TransactionConflict` on that item, `None` on the others);
 * - a PutItem, UpdateItem or DeleteItem on an item of an ongoing
 *   TransactWriteItems → TransactionConflictException.
 *
 * A transaction is ongoing from when the proxy receives it until DynamoDB
 * Local has answered it. `holdNextTransaction(n)` forces the interleaving:
 * the next transaction stays ongoing (received, not yet forwarded) until `n`
 * requests have been refused because of it; the promise it returns resolves
 * once that transaction is being held.
 */
export class ContentionProxy {
  private server: Server | undefined;
  private readonly ongoing = new Map<string, number>();
  private armed: { refusals: number; held: () => void } | null = null;
  private hold: { keys: string[]; remaining: number; release: () => void } | null = null;
  private readonly writing = new Map<string, number>();
  /**
   * Requests refused for a conflict; transactions forwarded; the most writes
   * (transactions, PutItem, UpdateItem, DeleteItem) that were ever in flight
   * on one item at once (`resetPeak()` starts over).
   */
  readonly stats = { conflicts: 0, transactions: 0, peak: 0 };
  url = '';

  constructor(private readonly upstream: URL) {}

  async start(): Promise<this> {
    this.server = createServer(
      withBody((req, res, body) => {
        const reply = (status: number, headers: IncomingHttpHeaders, payload: Buffer | string) =>
          res.writeHead(status, headers as Record<string, string>).end(payload);
        void this.handle(req.headers, body, req.method ?? 'POST', req.url ?? '/', reply).catch((err: unknown) => {
          res.writeHead(502).end(String(err));
        });
      }),
    );
    this.url = await listenOnLoopback(this.server);
    return this;
  }

  async stop(): Promise<void> {
    this.hold?.release();
    await closeNow(this.server);
  }

  resetPeak(): void {
    this.stats.peak = 0;
  }

  holdNextTransaction(refusals: number): Promise<void> {
    return new Promise((held) => (this.armed = { refusals, held }));
  }

  private async handle(
    headers: IncomingHttpHeaders,
    body: Buffer,
    method: string,
    path: string,
    reply: (status: number, headers: IncomingHttpHeaders, payload: Buffer | string) => void,
  ): Promise<void> {
    const op = String(headers['x-amz-target'] ?? '').split('.')[1];
    const input = body.length ? (JSON.parse(body.toString('utf8')) as Record<string, unknown>) : {};
    if (op === 'TransactWriteItems') {
      const keys = (input.TransactItems as Record<string, Record<string, unknown>>[]).map((action) => {
        const [, a] = Object.entries(action)[0]!;
        return keyOf(String(a.TableName), (a.Key ?? a.Item) as Record<string, unknown>);
      });
      if (keys.some((k) => this.ongoing.has(k))) {
        this.refused(keys);
        const codes = keys.map((k) => (this.ongoing.has(k) ? 'TransactionConflict' : 'None'));
        return reply(
          400,
          jsonHeaders,
          JSON.stringify({
            __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
            Message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(', ')}]`,
            CancellationReasons: codes.map((Code) => (Code === 'None' ? { Code } : { Code, Message: 'Transaction is ongoing for the item' })),
          }),
        );
      }
      for (const k of keys) this.ongoing.set(k, (this.ongoing.get(k) ?? 0) + 1);
      try {
        if (this.armed !== null) {
          const { refusals, held } = this.armed;
          this.armed = null;
          await new Promise<void>((release) => {
            this.hold = { keys, remaining: refusals, release };
            held();
          });
          this.hold = null;
        }
        this.stats.transactions++;
        const res = await this.writingOn(keys, () => this.forward(headers, body, method, path));
        return reply(res.status, res.headers, res.body);
      } finally {
        for (const k of keys) {
          const n = this.ongoing.get(k)! - 1;
          if (n === 0) this.ongoing.delete(k);
          else this.ongoing.set(k, n);
        }
      }
    }
    if (op === 'PutItem' || op === 'UpdateItem' || op === 'DeleteItem') {
      const key = keyOf(String(input.TableName), (input.Key ?? input.Item) as Record<string, unknown>);
      if (this.ongoing.has(key)) {
        this.refused([key]);
        return reply(
          400,
          jsonHeaders,
          JSON.stringify({ __type: 'com.amazonaws.dynamodb.v20120810#TransactionConflictException', message: 'Transaction is ongoing for the item' }),
        );
      }
      const res = await this.writingOn([key], () => this.forward(headers, body, method, path));
      return reply(res.status, res.headers, res.body);
    }
    const res = await this.forward(headers, body, method, path);
    return reply(res.status, res.headers, res.body);
  }

  private async writingOn<T>(keys: readonly string[], run: () => Promise<T>): Promise<T> {
    for (const k of keys) {
      const n = (this.writing.get(k) ?? 0) + 1;
      this.writing.set(k, n);
      this.stats.peak = Math.max(this.stats.peak, n);
    }
    try {
      return await run();
    } finally {
      for (const k of keys) {
        const n = this.writing.get(k)! - 1;
        if (n === 0) this.writing.delete(k);
        else this.writing.set(k, n);
      }
    }
  }

  private refused(keys: readonly string[]): void {
    this.stats.conflicts++;
    const h = this.hold;
    if (h && keys.some((k) => h.keys.includes(k)) && --h.remaining <= 0) h.release();
  }

  private forward(headers: IncomingHttpHeaders, body: Buffer, method: string, path: string): Promise<Forwarded> {
    return forwardHttp(this.upstream, headers, body, method, path);
  }
}

const jsonHeaders: IncomingHttpHeaders = { 'content-type': 'application/x-amz-json-1.0' };

/** Items are named by table and primary key (pk, sk), whatever else an action carries. */
function keyOf(table: string, item: Record<string, unknown>): string {
  return `${table}|${JSON.stringify(item.pk)}|${JSON.stringify(item.sk)}`;
}

/** The DynamoDB endpoint the harness started (DynamoDB Local). */
export function dynamoEndpoint(): URL {
  const url = process.env.AWS_ENDPOINT_URL_DYNAMODB ?? process.env.AWS_ENDPOINT_URL;
  if (!url) throw new Error('AWS_ENDPOINT_URL_DYNAMODB is not set: run the suites through `npm run test:contract`, which starts DynamoDB Local');
  return new URL(url);
}
