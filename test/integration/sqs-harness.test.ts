/**
 * The harness's SQS endpoint behaves like SQS for what the work-run queue will
 * rely on: long-poll receive, visibility timeout, redrive to a DLQ.
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
import { sqsClient } from '../../shared/queue/sqs/connect.js';
import { uniqueName } from '../support/backends.js';

describe('SQS endpoint', () => {
  const sqs = sqsClient();
  const queues: string[] = [];
  afterAll(async () => {
    for (const q of queues) await sqs.send(new DeleteQueueCommand({ QueueUrl: q })).catch(() => undefined);
    sqs.destroy();
  });

  it('is configured through AWS_ENDPOINT_URL_SQS (or AWS_ENDPOINT_URL)', () => {
    expect(process.env.AWS_ENDPOINT_URL_SQS ?? process.env.AWS_ENDPOINT_URL ?? process.env.ROLLOUT_TEST_AWS).toBeTruthy();
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
