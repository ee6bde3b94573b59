/**
 * The harness's SQS endpoint is the one the suites reach, and behaves like SQS
 * for what the work-run queue relies on: send and receive, visibility
 * timeout, redrive to a DLQ.
 */
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { afterAll, describe, expect, it } from 'vitest';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { uniqueName } from '../support/backends.js';

describe('SQS endpoint', () => {
  const sqs = sqsClient();
  const queues: string[] = [];
  afterAll(async () => {
    for (const q of queues) await sqs.send(new DeleteQueueCommand({ QueueUrl: q })).catch(() => undefined);
    sqs.destroy();
  });

  it('is the endpoint the harness set: a message sent is received with the same body, from a queue whose URL names that endpoint', async () => {
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('probe') }))).QueueUrl!;
    queues.push(url);
    const body = JSON.stringify({ probe: uniqueName('m') });
    const sent = await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: body }));
    const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 5 }));
    expect(Messages?.map((m) => [m.MessageId, m.Body])).toEqual([[sent.MessageId, body]]);
    // The harness starts fauxqs and sets AWS_ENDPOINT_URL_SQS unless given an endpoint for every AWS service
    // (AWS_ENDPOINT_URL, e.g. LocalStack) or a real account; its fauxqs listens on loopback only and says so in queue URLs.
    const endpoint = process.env.AWS_ENDPOINT_URL_SQS;
    if (!endpoint) return;
    const { hostname, port } = new URL(endpoint);
    expect(hostname).toBe('127.0.0.1');
    // fauxqs prefixes the host the SQS way (sqs.<region>.127.0.0.1): not resolvable, hence useQueueUrlAsEndpoint off in sqsClient.
    expect(url).toMatch(new RegExp(`^http://(?:sqs\\.[a-z0-9-]+\\.)?127\\.0\\.0\\.1:${port}/\\d+/probe-`));
  });

  it('moves a message that keeps coming back to the DLQ after maxReceiveCount', async () => {
    const dlq = (await sqs.send(new CreateQueueCommand({ QueueName: uniqueName('dlq') }))).QueueUrl!;
    queues.push(dlq);
    const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ['QueueArn'] }));
    const main = (
      await sqs.send(
        new CreateQueueCommand({
          QueueName: uniqueName('work'),
          Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: Attributes!.QueueArn, maxReceiveCount: 2 }) },
        }),
      )
    ).QueueUrl!;
    queues.push(main);

    await sqs.send(new SendMessageCommand({ QueueUrl: main, MessageBody: 'item-1' }));
    for (let receive = 1; receive <= 2; receive++) {
      const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: main, WaitTimeSeconds: 5, VisibilityTimeout: 30 }));
      expect(Messages?.[0]?.Body, `receive ${receive}`).toBe('item-1');
      // A crashed worker: the message becomes visible again (here at once).
      await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: main, ReceiptHandle: Messages![0]!.ReceiptHandle!, VisibilityTimeout: 0 }));
    }
    const third = await sqs.send(new ReceiveMessageCommand({ QueueUrl: main, WaitTimeSeconds: 1 }));
    expect(third.Messages ?? []).toHaveLength(0);
    const dead = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq, WaitTimeSeconds: 5 }));
    expect(dead.Messages?.[0]?.Body).toBe('item-1');
  });
});
