import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OutboundHttp } from '../../../shared/adapters/http/outbound.js';
import { WebhookActuator } from '../../../shared/adapters/actuators/webhook/actuator.js';
import { OutboundPolicy } from '../../../shared/outbound/policy.js';
import { OperatorSecrets } from '../../../shared/outbound/secrets.js';
import type { ActuatorFixture } from './fixture.js';

/**
 * A receiver of the webhook actuator's protocol (docs/concepts/actuators-and-assignment.md#moving-traffic-actuators, "The webhook protocol"), as a
 * team would write one in front of whatever keeps their split: one state,
 * GET answers it, POST replaces it. With `revisions` it conditions a write on
 * the revision it last answered (409 on a stale one); without, it takes any
 * write, and the actuator re-reads before writing. It checks each request's
 * HMAC signature, so a request we did not sign is refused (401).
 */
export interface WebhookReceiver {
  readonly url: string;
  /** What it carries now. */
  state: { percent: number; final: boolean; stamp: string | null; revision: number };
  /** Requests it refused for their signature. */
  unsigned: number;
  /** Bodies of the POSTs it accepted. */
  readonly posts: Record<string, unknown>[];
  close(): Promise<void>;
}

export const RECEIVER_KEY_ID = 'rollout-actuator';
export const RECEIVER_SECRET = 'webhook-target-secret-0123456789';

export async function startWebhookReceiver(o: { readonly revisions: boolean }): Promise<WebhookReceiver> {
  const r: Omit<WebhookReceiver, 'url' | 'close'> = { state: { percent: 0, final: false, stamp: null, revision: 1 }, unsigned: 0, posts: [] };
  const answer = () =>
    JSON.stringify({
      percent: r.state.percent,
      final: r.state.final,
      stamp: r.state.stamp,
      ...(o.revisions ? { revision: String(r.state.revision) } : {}),
      detail: `revision ${r.state.revision}`,
    });
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const reply = (status: number, text: string) => res.writeHead(status, { 'content-type': 'application/json' }).end(text);
      if (!signed(String(req.headers['rollout-signature'] ?? ''), body)) {
        r.unsigned++;
        return reply(401, '{"error":"bad signature"}');
      }
      if (req.method === 'GET') return reply(200, answer());
      if (req.method !== 'POST') return reply(405, '{}');
      const w = JSON.parse(body) as { percent: number; final: boolean; stamp: string; expectedRevision: string | null };
      if (o.revisions && w.expectedRevision !== String(r.state.revision))
        return reply(409, JSON.stringify({ error: `revision ${String(w.expectedRevision)} is stale; now ${r.state.revision}` }));
      if (typeof w.percent !== 'number' || w.percent < 0 || w.percent > 100) return reply(422, '{"error":"percent out of range"}');
      r.posts.push(JSON.parse(body) as Record<string, unknown>);
      r.state = { percent: w.final ? 100 : w.percent, final: w.final, stamp: w.stamp, revision: r.state.revision + 1 };
      return reply(200, answer());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/split`;
  return Object.assign(r, { url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
}

function signed(header: string, body: string): boolean {
  const m = /^k=([^,]+),t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (!m || m[1] !== RECEIVER_KEY_ID) return false;
  const want = createHmac('sha256', RECEIVER_SECRET).update(`${m[2]}.${body}`).digest();
  return timingSafeEqual(want, Buffer.from(m[3]!, 'hex'));
}

/** The operator's configuration for a receiver: its origin allow-listed, an hmac credential bound to it. */
export function receiverPolicy(url: string): OutboundPolicy {
  return new OutboundPolicy({
    origins: [new URL(url).origin],
    credentials: { 'split-key': { type: 'hmac', origin: new URL(url).origin, keyId: RECEIVER_KEY_ID, secret: { env: 'SPLIT_SECRET' } } },
  });
}

export const receiverSecrets = () => new OperatorSecrets({ env: { SPLIT_SECRET: RECEIVER_SECRET } });

export function webhookFixture(o: { readonly revisions: boolean }): ActuatorFixture {
  return {
    kind: o.revisions ? 'webhook (with revisions)' : 'webhook (without revisions)',
    async setup() {
      const receiver = await startWebhookReceiver(o);
      const actuator = new WebhookActuator(
        'flags',
        { type: 'webhook', url: receiver.url, credential: 'split-key', timeoutSeconds: 5 },
        { outbound: new OutboundHttp(receiverPolicy(receiver.url)), secrets: receiverSecrets() },
      );
      return {
        actuator,
        newVersion: 'v2',
        tamper(percent: number) {
          receiver.state = { ...receiver.state, percent, revision: receiver.state.revision + 1 };
          return Promise.resolve();
        },
        close: () => receiver.close(),
      };
    },
  };
}
