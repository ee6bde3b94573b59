import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { z } from 'zod';
import type { StealNotice } from './coordinator.js';
import type { CoordinatorClient } from './worker.js';

/**
 * How a worker outside the coordinator's process asks it for work. The
 * answer is checked by the worker's EpochGuard either way; a lost answer
 * costs nothing (the items it moved are adopted by the worker's reconcile).
 */

export const coordinatorRequest = z.discriminatedUnion('action', [
  z.object({ action: z.literal('steal'), runId: z.string().min(1), workerId: z.string().min(1) }).strict(),
  z.object({ action: z.literal('scan'), runId: z.string().min(1) }).strict(),
  /** The schedule's request: scan every open run. */
  z.object({ action: z.literal('scan-all') }).strict(),
]);
export type CoordinatorRequest = z.infer<typeof coordinatorRequest>;

const noticeSchema = z.object({ epoch: z.number().int().nonnegative(), victim: z.string().nullable(), items: z.array(z.string()) });
const replySchema = z.union([z.object({ leader: z.literal(true), notice: noticeSchema }), z.object({ leader: z.literal(false), holder: z.string().nullable() })]);
export type CoordinatorReply = z.infer<typeof replySchema>;

function noticeOf(reply: unknown, from: string): StealNotice {
  const parsed = replySchema.safeParse(reply);
  if (!parsed.success) throw new Error(`coordinator reply from ${from} is malformed: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  // No coordinator right now (it is being elected): no work to hand out, ask again later.
  return parsed.data.leader ? parsed.data.notice : { epoch: 0, victim: null, items: [] };
}

/** The coordinator Lambda, invoked synchronously. */
export class LambdaCoordinatorClient implements CoordinatorClient {
  constructor(
    private readonly lambda: LambdaClient,
    private readonly functionName: string,
    private readonly runId: string,
  ) {}

  async requestWork(workerId: string): Promise<StealNotice> {
    const request: CoordinatorRequest = { action: 'steal', runId: this.runId, workerId };
    const res = await this.lambda.send(new InvokeCommand({ FunctionName: this.functionName, Payload: new TextEncoder().encode(JSON.stringify(request)) }));
    const body = res.Payload ? new TextDecoder().decode(res.Payload) : '';
    if (res.FunctionError) throw new Error(`coordinator ${this.functionName} failed: ${res.FunctionError}: ${body.slice(0, 300)}`);
    return noticeOf(JSON.parse(body) as unknown, this.functionName);
  }
}

/** A coordinator served over HTTP (a cluster node's POST /coordinator, or nginx in front of the nodes): POST <url> with the request as JSON. */
export class HttpCoordinatorClient implements CoordinatorClient {
  constructor(
    private readonly url: string,
    private readonly runId: string,
  ) {}

  async requestWork(workerId: string): Promise<StealNotice> {
    const request: CoordinatorRequest = { action: 'steal', runId: this.runId, workerId };
    let url = this.url;
    for (let hop = 0; ; hop++) {
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(request), signal: AbortSignal.timeout(10_000) });
      const text = await res.text();
      // A follower node names the leader, which runs the coordinators: ask it once.
      const leader = res.headers.get('x-rollout-leader-url');
      if (res.status === 503 && leader && hop === 0) {
        url = new URL(new URL(this.url).pathname, leader).toString();
        continue;
      }
      if (!res.ok) throw new Error(`coordinator ${url}: HTTP ${res.status} ${text.slice(0, 300)}`);
      return noticeOf(JSON.parse(text) as unknown, url);
    }
  }
}
