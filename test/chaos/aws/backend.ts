/**
 * The workers' execution backend, served by the harness (`rollout worker
 * --backend http`), so every execution is seen from outside the worker: which
 * payload ran, when, and whether the backend failed it. A payload marked
 * `poison` always fails (HTTP 500), so the item ends Failed; every other one
 * takes `itemMs` and answers a result derived from the payload alone. A
 * worker that abandons an item (its claim was lost) closes the connection:
 * that execution's outcome is unknown.
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { closeNow, listenOnLoopback, withBody } from '../../support/local-server.js';

export interface Execution {
  readonly payload: Record<string, unknown>;
  readonly startedAt: number;
  endedAt: number | null;
  ok: boolean | null;
}

export class ChaosBackend {
  private server: Server | undefined;
  readonly executions: Execution[] = [];
  url = '';

  constructor(private readonly o: { readonly itemMs: number; readonly now: () => number }) {}

  async start(): Promise<this> {
    this.server = createServer(
      withBody((req, res, body) => {
        const text = body.toString('utf8');
        let payload: Record<string, unknown>;
        try {
          payload = JSON.parse(text) as Record<string, unknown>;
        } catch {
          res.writeHead(400).end('not JSON');
          return;
        }
        const e: Execution = { payload, startedAt: this.o.now(), endedAt: null, ok: null };
        this.executions.push(e);
        const timer = setTimeout(() => {
          e.endedAt = this.o.now();
          e.ok = payload.poison !== true;
          if (!e.ok) res.writeHead(500, { 'content-type': 'text/plain' }).end(`poison payload ${String(payload.run)}#${String(payload.i)}`);
          else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ output: createHash('sha256').update(text).digest('hex') }));
        }, this.o.itemMs);
        res.on('close', () => {
          if (e.endedAt !== null) return;
          // The worker gave the item up (its claim was lost, or it is draining) before an answer.
          clearTimeout(timer);
          e.endedAt = this.o.now();
        });
      }),
    );
    this.url = `${await listenOnLoopback(this.server)}/execute`;
    return this;
  }

  async stop(): Promise<void> {
    await closeNow(this.server);
  }
}
