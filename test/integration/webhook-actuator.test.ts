/**
 * The webhook actuator beyond the actuator contract (which it passes, with
 * and without revisions): what it sends, and how it fails, against a real
 * HTTP receiver. Each failure names the target and what was wrong, and
 * nothing is written.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TargetRefusedError, type Desired, type Stamp } from '../../shared/actuation/port.js';
import { OutboundHttp } from '../../shared/adapters/http/outbound.js';
import { WebhookActuator } from '../../shared/adapters/actuators/webhook/actuator.js';
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import { receiverPolicy, receiverSecrets, RECEIVER_SECRET, startWebhookReceiver, type WebhookReceiver } from '../support/actuators/webhook.js';

const desired: Desired = { rolloutId: 'r-hook', attempt: 2, stage: 1, percent: 25, final: false, newVersion: 'v7', version: 12 };
const stamp: Stamp = { rolloutId: 'r-hook', attempt: 2, stage: 1, epoch: 4, percent: 25, final: false, version: 12 };

describe('webhook actuator', () => {
  let receiver: WebhookReceiver;
  let odd: Server;
  let oddUrl: string;
  let oddAnswer = { status: 200, body: '{}' };
  beforeAll(async () => {
    receiver = await startWebhookReceiver({ revisions: true });
    odd = createServer((_req, res) => res.writeHead(oddAnswer.status, { 'content-type': 'application/json' }).end(oddAnswer.body));
    await new Promise<void>((r) => odd.listen(0, '127.0.0.1', r));
    oddUrl = `http://127.0.0.1:${(odd.address() as AddressInfo).port}/split`;
  });
  afterAll(async () => {
    await receiver?.close();
    await new Promise((r) => odd?.close(r));
  });

  const actuator = (url: string, o: { credential?: boolean; policy?: OutboundPolicy } = {}) =>
    new WebhookActuator(
      'flags',
      { type: 'webhook', url, timeoutSeconds: 5, ...(o.credential === false ? {} : { credential: 'split-key' }) },
      { outbound: new OutboundHttp(o.policy ?? receiverPolicy(url)), secrets: receiverSecrets() },
    );

  it('a write sends the state, its stamp, the revision it was decided on and an idempotency key, signed; the secret never travels', async () => {
    const a = actuator(receiver.url);
    const after = await a.write(desired, stamp, await a.read('v7'));
    expect(after).toMatchObject({ percent: 25, final: false, stamp });
    expect(receiver.posts.at(-1)).toMatchObject({
      rolloutId: 'r-hook',
      attempt: 2,
      stage: 1,
      percent: 25,
      final: false,
      newVersion: 'v7',
      version: 12,
      epoch: 4,
      stamp: 'rollout=r-hook attempt=2 stage=1 epoch=4 percent=25 final=false version=12',
      expectedRevision: '1',
      idempotencyKey: 'r-hook:2:1:actuate:12',
    });
    expect(JSON.stringify(receiver.posts)).not.toContain(RECEIVER_SECRET);
  });

  it('a request we did not sign is refused by the receiver: the read fails naming the answer', async () => {
    await expect(actuator(receiver.url, { credential: false }).read('v7')).rejects.toThrow(/flags: GET answered HTTP 401/);
  });

  it('an origin the operator has not allow-listed is refused before any request', async () => {
    const before = receiver.unsigned + receiver.posts.length;
    await expect(actuator(receiver.url, { policy: OutboundPolicy.none() }).read('v7')).rejects.toThrow(
      /target flags url: http:\/\/127\.0\.0\.1:\d+ is not an allowed origin/,
    );
    expect(receiver.unsigned + receiver.posts.length).toBe(before);
  });

  it('an answer that is not a state names what is wrong with it', async () => {
    const a = actuator(oddUrl, { credential: false });
    oddAnswer = { status: 200, body: 'ok' };
    await expect(a.read('v7')).rejects.toThrow(/flags: GET answered no JSON state: "ok"/);
    oddAnswer = { status: 200, body: '{"percent":140,"final":false}' };
    await expect(a.read('v7')).rejects.toThrow(/percent is not a number within 0–100 \(140\)/);
    oddAnswer = { status: 200, body: '{"percent":10}' };
    await expect(a.read('v7')).rejects.toThrow(/without a boolean final/);
  });

  it('a 422 is a refusal of the content (nothing changed): TargetRefusedError, recorded as failed by the reconciler', async () => {
    const a = actuator(oddUrl, { credential: false });
    oddAnswer = { status: 200, body: '{"percent":0,"final":false,"stamp":null,"revision":"9"}' };
    const observed = await a.read('v7');
    oddAnswer = { status: 422, body: '{"error":"version v7 is not deployed"}' };
    await expect(a.write(desired, stamp, observed)).rejects.toBeInstanceOf(TargetRefusedError);
    await expect(a.write(desired, stamp, observed)).rejects.toThrow(/version v7 is not deployed/);
  });

  it('a split the receiver reports as not ours is read as foreign: drift, never written over', async () => {
    oddAnswer = { status: 200, body: '{"percent":30,"final":false,"stamp":null,"foreign":"30% to v6 set by the flags UI"}' };
    expect(await actuator(oddUrl, { credential: false }).read('v7')).toMatchObject({ percent: 30, stamp: null, foreignSplit: '30% to v6 set by the flags UI' });
  });
});
