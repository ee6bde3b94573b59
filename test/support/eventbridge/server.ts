/**
 * An EventBridge stand-in, for the AWS chaos topology only: it delivers in
 * microseconds and lets a schedule fire at the chaos clock's pace, where
 * moto (which the integration tests route through: eventbridge/moto.ts)
 * spends some 170 ms on each delivery and cannot invoke a function. Its
 * matcher is ours (shared/events/pattern.ts), which
 * test/infra/pattern-differential.test.ts holds against moto's. It speaks the AWS JSON 1.1 protocol for PutRule, PutTargets and PutEvents, so
 * the unmodified SDK client reaches it through AWS_ENDPOINT_URL_EVENTBRIDGE.
 * Rules and targets are loaded from the synthesized template, so the
 * patterns tested are the patterns that deploy. Delivery follows AWS:
 *  - a Lambda target is invoked asynchronously (here: the handler, in-process); a failure is
 *    retried `MaximumRetryAttempts` times (the function's EventInvokeConfig), then the event goes
 *    to the function's DLQ with `ErrorCode`/`ErrorMessage` attributes;
 *  - an SQS target gets the event as the message body (on the test's SQS endpoint).
 */
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { matches, type Pattern } from '../../../shared/events/pattern.js';
import { invokeAsync, sendToDlq, type Handler } from './lambda.js';
import { templateRules } from './template.js';

export type { Handler } from './lambda.js';

interface Target {
  readonly id: string;
  readonly arn: string;
  readonly input?: string;
}

interface Rule {
  readonly name: string;
  readonly bus: string;
  readonly pattern: Pattern | null;
  readonly schedule: string | null;
  targets: Target[];
}

export interface Delivery {
  readonly rule: string;
  readonly target: string;
  readonly event: unknown;
  readonly ok: boolean;
  readonly attempts: number;
  readonly error?: string;
}

export interface StandInOptions {
  sqs: SQSClient;
  /** Lambda function ARN → its handler, retry count and DLQ (an SQS queue URL). */
  lambdas?: Record<string, { handler: Handler; retries: number; dlqUrl?: string }>;
  /** SQS queue ARN → queue URL on the test endpoint. */
  queues?: Record<string, string>;
  account?: string;
  region?: string;
}

type Cfn = { Type: string; Properties: Record<string, unknown> };

export class EventBridgeStandIn {
  readonly rules = new Map<string, Rule>();
  readonly deliveries: Delivery[] = [];
  private server: Server | null = null;
  url = '';

  constructor(private readonly o: StandInOptions) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const target = String(req.headers['x-amz-target'] ?? '');
        Promise.resolve()
          .then(() => this.call(target.replace(/^AWSEvents\./, ''), body ? (JSON.parse(body) as Record<string, unknown>) : {}))
          .then(
            (out) => res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' }).end(JSON.stringify(out)),
            (err: Error) =>
              res
                .writeHead(400, { 'content-type': 'application/x-amz-json-1.1' })
                .end(JSON.stringify({ __type: err.name === 'Error' ? 'ValidationException' : err.name, message: err.message })),
          );
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  /**
   * Rules and targets of a synthesized template. `names` gives the physical name or ARN of each
   * logical id the rules refer to (buses, functions, queues), as a deployment would have made them.
   */
  loadTemplate(template: { Resources: Record<string, Cfn> }, names: Record<string, string>): void {
    for (const rule of templateRules(template, names)) {
      this.call('PutRule', {
        Name: rule.id,
        EventBusName: rule.bus,
        ...(rule.pattern ? { EventPattern: rule.pattern } : {}),
        ...(rule.schedule ? { ScheduleExpression: rule.schedule } : {}),
      });
      this.call('PutTargets', { Rule: rule.id, EventBusName: rule.bus, Targets: rule.targets });
    }
  }

  /** Fire every schedule rule once (what the clock would do), e.g. to catch up after a dropped event. */
  async tick(): Promise<void> {
    for (const rule of this.rules.values()) {
      if (!rule.schedule) continue;
      const event = this.envelope({
        Source: 'aws.events',
        DetailType: 'Scheduled Event',
        Detail: '{}',
        Resources: [`arn:aws:events:${this.region}:${this.account}:rule/${rule.name}`],
      });
      await Promise.all(rule.targets.map((t) => this.deliver(rule, t, event)));
    }
  }

  private get account(): string {
    return this.o.account ?? '000000000000';
  }

  private get region(): string {
    return this.o.region ?? process.env.AWS_REGION ?? 'us-east-1';
  }

  private call(op: string, req: Record<string, unknown>): unknown {
    switch (op) {
      case 'PutRule': {
        const name = str(req.Name);
        if (!name) throw new Error('PutRule: Name is required');
        const pattern = req.EventPattern ? (JSON.parse(str(req.EventPattern)) as Pattern) : null;
        if (!pattern && !req.ScheduleExpression) throw new Error('PutRule: give EventPattern or ScheduleExpression');
        const existing = this.rules.get(name);
        this.rules.set(name, {
          name,
          bus: str(req.EventBusName) || 'default',
          pattern,
          schedule: str(req.ScheduleExpression) || null,
          targets: existing?.targets ?? [],
        });
        return { RuleArn: `arn:aws:events:${this.region}:${this.account}:rule/${name}` };
      }
      case 'PutTargets': {
        const rule = this.rules.get(String(req.Rule));
        if (!rule) throw Object.assign(new Error(`Rule ${String(req.Rule)} does not exist`), { name: 'ResourceNotFoundException' });
        for (const t of req.Targets as Record<string, unknown>[]) {
          rule.targets = [...rule.targets.filter((x) => x.id !== t.Id), { id: String(t.Id), arn: String(t.Arn), ...(t.Input ? { input: str(t.Input) } : {}) }];
        }
        return { FailedEntryCount: 0, FailedEntries: [] };
      }
      case 'PutEvents': {
        const entries = req.Entries as Record<string, unknown>[];
        if (!Array.isArray(entries) || entries.length < 1 || entries.length > 10) throw new Error('PutEvents: Entries must hold 1 to 10 events');
        const results: Record<string, unknown>[] = [];
        for (const e of entries) {
          if (!e.Source || !e.DetailType || typeof e.Detail !== 'string') {
            results.push({ ErrorCode: 'InvalidArgument', ErrorMessage: 'Source, DetailType and Detail are required' });
            continue;
          }
          let event: Record<string, unknown>;
          try {
            event = this.envelope(e);
          } catch {
            results.push({ ErrorCode: 'MalformedDetail', ErrorMessage: 'Detail is malformed.' });
            continue;
          }
          results.push({ EventId: event.id });
          const bus = (str(e.EventBusName) || 'default').split('/').at(-1)!;
          for (const rule of this.rules.values()) {
            if (rule.bus !== bus || !rule.pattern || !matches(rule.pattern, event)) continue;
            // Asynchronous, as in AWS: PutEvents returns once the events are accepted.
            for (const t of rule.targets) void this.deliver(rule, t, event);
          }
        }
        return { FailedEntryCount: results.filter((r) => r.ErrorCode).length, Entries: results };
      }
      default:
        throw Object.assign(new Error(`operation ${op} is not served by the tests' EventBridge`), { name: 'UnknownOperationException' });
    }
  }

  private envelope(e: Record<string, unknown>): Record<string, unknown> {
    return {
      version: '0',
      id: randomUUID(),
      'detail-type': e.DetailType,
      source: e.Source,
      account: this.account,
      // The SDK sends Time as epoch seconds (AWS JSON 1.1 timestamps); a string is taken as a date.
      time: (e.Time === undefined || e.Time === null ? new Date() : typeof e.Time === 'number' ? new Date(e.Time * 1000) : new Date(e.Time as string))
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z'),
      region: this.region,
      resources: e.Resources ?? [],
      detail: JSON.parse(String(e.Detail)) as unknown,
    };
  }

  /** Settles when every delivery started so far has finished (retries and DLQ included). */
  async idle(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  private readonly inFlight = new Set<Promise<void>>();

  private deliver(rule: Rule, t: Target, event: unknown): Promise<void> {
    const p = this.deliverOnce(rule, t, event).finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
    return p;
  }

  private async deliverOnce(rule: Rule, t: Target, event: unknown): Promise<void> {
    const payload = t.input ? (JSON.parse(t.input) as unknown) : event;
    if (t.arn.startsWith('arn:aws:sqs:')) {
      const url = this.o.queues?.[t.arn];
      if (!url) throw new Error(`no queue URL for ${t.arn}`);
      await this.o.sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify(payload) }));
      this.deliveries.push({ rule: rule.name, target: t.id, event: payload, ok: true, attempts: 1 });
      return;
    }
    const fn = this.o.lambdas?.[t.arn];
    if (!fn) throw new Error(`no handler for ${t.arn}`);
    const outcome = await invokeAsync(fn, payload);
    this.deliveries.push({ rule: rule.name, target: t.id, event: payload, ...outcome });
    if (!outcome.ok && fn.dlqUrl) await sendToDlq(this.o.sqs, fn.dlqUrl, payload, outcome.error!);
  }
}

/** A request field that must be a string (empty when absent). */
function str(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new Error(`expected a string, got ${JSON.stringify(v)}`);
  return v;
}
