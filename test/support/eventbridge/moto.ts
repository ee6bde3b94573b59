/**
 * EventBridge on moto, for the tests over AWS endpoints. The buses, the rules
 * as the synthesized template declares them, their patterns and their SQS
 * targets are moto's: routing is an emulator's, not ours. What moto cannot do
 * without Docker, invoke a Lambda function, is played here:
 *  - each (rule, Lambda target) pair delivers to a moto queue of its own, so the rule that matched is known;
 *  - when a PutEvents has been answered (a thin proxy in front of moto sees it), those queues are
 *    drained and each event is handed to the function's handler, in-process;
 *  - as Lambda's asynchronous invocation does: a failure is retried `retries` times (the function's
 *    EventInvokeConfig), then the event goes to the function's DLQ with `ErrorCode`/`ErrorMessage`.
 * Schedules do not fire on moto: `tick()` fires each schedule rule once.
 */
import { EventBridgeClient, PutRuleCommand, PutTargetsCommand } from '@aws-sdk/client-eventbridge';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { forwardHttp } from '../http-forward.js';
import { invokeAsync, sendToDlq, type Handler } from './lambda.js';
import type { Delivery } from './server.js';
import { templateRules } from './template.js';

type Cfn = { Type: string; Properties: Record<string, unknown> };

export interface MotoEventBridgeOptions {
  /** moto's URL. */
  moto: string;
  region: string;
  /** moto's account (its default: 123456789012). */
  account?: string;
  /** Lambda function ARN → its handler, retry count and DLQ (a queue ARN made with `queue()`). */
  lambdas: Record<string, { handler: Handler; retries: number; dlqArn?: string }>;
}

export class MotoEventBridge {
  readonly deliveries: Delivery[] = [];
  /** The proxy in front of moto: what AWS_ENDPOINT_URL_EVENTBRIDGE names. */
  url = '';
  readonly sqs: SQSClient;
  private readonly events: EventBridgeClient;
  private readonly tag = randomUUID().slice(0, 8);
  private readonly queueUrls = new Map<string, string>(); // ARN → URL, every queue made here
  private readonly invokes = new Map<string, { rule: string; fn: string }>(); // invoke queue URL → what it stands for
  private readonly schedules: { rule: string; targets: { Arn: string; Input?: string }[] }[] = [];
  private server: Server | null = null;
  private draining: Promise<void> | null = null;
  private again = false;
  private failure: Error | null = null;

  constructor(private readonly o: MotoEventBridgeOptions) {
    const client = { region: o.region, endpoint: o.moto, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } };
    this.sqs = new SQSClient(client);
    this.events = new EventBridgeClient(client);
  }

  private get account(): string {
    return this.o.account ?? '123456789012';
  }

  async start(): Promise<this> {
    const upstream = new URL(this.o.moto);
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        forwardHttp(upstream, req.headers, Buffer.concat(chunks), req.method ?? 'POST', req.url ?? '/').then(
          (answer) => {
            res.writeHead(answer.status, answer.headers).end(answer.body);
            // moto has put what matched on the target queues before answering; Lambda takes it from here.
            if (String(req.headers['x-amz-target']).endsWith('.PutEvents')) this.kick();
          },
          (err: Error) => res.writeHead(502).end(err.message),
        );
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await this.idle().catch(() => undefined);
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    for (const url of this.queueUrls.values()) await this.sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    this.sqs.destroy();
    this.events.destroy();
  }

  /** A queue on moto (a target, a DLQ): its ARN and URL. */
  async queue(name: string): Promise<{ arn: string; url: string }> {
    const url = (await this.sqs.send(new CreateQueueCommand({ QueueName: `${name}-${this.tag}`.slice(0, 80), Attributes: { VisibilityTimeout: '300' } })))
      .QueueUrl!;
    const arn = (await this.sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn!;
    this.queueUrls.set(arn, url);
    return { arn, url };
  }

  /**
   * The template's rules and targets, put on moto. `names` gives the physical name or ARN of each
   * logical id the rules refer to (buses, functions, queues), as a deployment would have made them.
   */
  async loadTemplate(template: { Resources: Record<string, Cfn> }, names: Record<string, string>): Promise<void> {
    for (const r of templateRules(template, names)) {
      const rule = `${r.id}-${this.tag}`.slice(0, 64); // rules on the default bus outlive a test file
      await this.events.send(
        new PutRuleCommand({
          Name: rule,
          EventBusName: r.bus,
          ...(r.pattern ? { EventPattern: r.pattern } : {}),
          ...(r.schedule ? { ScheduleExpression: r.schedule } : {}),
        }),
      );
      const targets: { Id: string; Arn: string; Input?: string }[] = [];
      for (const t of r.targets) {
        if (!t.Arn.startsWith('arn:aws:lambda:')) targets.push(t);
        else {
          if (!this.o.lambdas[t.Arn]) throw new Error(`no handler for ${t.Arn}`);
          const q = await this.queue(`invoke-${r.id}-${t.Id}`);
          this.invokes.set(q.url, { rule: r.id, fn: t.Arn });
          targets.push({ ...t, Arn: q.arn });
        }
      }
      // moto takes a rule without a pattern to match every event on its bus, a schedule rule included;
      // AWS sends a schedule rule's targets its scheduled events only. So those targets stay here, for tick().
      if (r.schedule) this.schedules.push({ rule, targets });
      else await this.events.send(new PutTargetsCommand({ Rule: rule, EventBusName: r.bus, Targets: targets }));
    }
  }

  /** Fire every schedule rule once (what the clock would do), to its targets. */
  async tick(): Promise<void> {
    for (const { rule, targets } of this.schedules) {
      const event = {
        version: '0',
        id: randomUUID(),
        'detail-type': 'Scheduled Event',
        source: 'aws.events',
        account: this.account,
        time: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
        region: this.o.region,
        resources: [`arn:aws:events:${this.o.region}:${this.account}:rule/${rule}`],
        detail: {},
      };
      for (const t of targets)
        await this.sqs.send(new SendMessageCommand({ QueueUrl: this.queueUrls.get(t.Arn)!, MessageBody: t.Input ?? JSON.stringify(event) }));
    }
    this.kick();
  }

  /** Settles when every invocation started so far has finished (retries and DLQ included). */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
    if (this.failure) throw this.failure;
  }

  private kick(): void {
    if (this.draining) {
      this.again = true;
      return;
    }
    this.again = false;
    this.draining = (async () => {
      while ((await this.pass()) > 0);
    })()
      .catch((err: unknown) => {
        this.failure = err instanceof Error ? err : new Error(String(err));
      })
      .finally(() => {
        this.draining = null;
        if (this.again) this.kick();
      });
  }

  /** One look at every invoke queue; the number of events handed over. */
  private async pass(): Promise<number> {
    let n = 0;
    for (const [url, { rule, fn }] of this.invokes) {
      const got = (await this.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }))).Messages ?? [];
      n += got.length;
      await Promise.all(
        got.map(async (m) => {
          await this.invoke(rule, fn, JSON.parse(m.Body!) as unknown);
          await this.sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }));
        }),
      );
    }
    return n;
  }

  private async invoke(rule: string, arn: string, event: unknown): Promise<void> {
    const fn = this.o.lambdas[arn]!;
    const outcome = await invokeAsync(fn, event);
    this.deliveries.push({ rule, target: arn, event, ...outcome });
    if (!outcome.ok && fn.dlqArn) await sendToDlq(this.sqs, this.queueUrls.get(fn.dlqArn)!, event, outcome.error!);
  }
}
