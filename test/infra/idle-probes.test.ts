/**
 * What an idle stack's cost rests on, run against real services (DynamoDB
 * Local, PostgreSQL, fauxqs for SQS; started here unless the harness gave
 * them): the activity flags that keep the scheduled probes off an idle
 * Aurora database without ever missing work started meanwhile, the pools
 * closed at the end of each invocation, and the work DLQ drained by the
 * coordinator's scan instead of an event source mapping.
 */
import { CreateTableCommand, DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { CreateQueueCommand, DeleteQueueCommand, GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2WithIAMAuthorizer } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ActivityFlags, RAISE_GRACE_MS, SWEEP_EVERY_MS } from '../../functions/activity.js';
import { apiLambdaHandler } from '../../functions/api.js';
import { batchPromoterHandler } from '../../functions/batch-promoter.js';
import { coordinatorHandler } from '../../functions/coordinator.js';
import { invocationScoped, runtimeFrom, type Runtime } from '../../functions/runtime.js';
import { sqsClient } from '../../shared/adapters/sqs/connect.js';
import { SqsWorkQueue } from '../../shared/adapters/sqs/queue.js';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { coordinatorLease } from '../../shared/ledger/store.js';
import { startServices, type ServiceSet } from '../harness/services.js';
import { freshDatabase, uniqueName } from '../support/backends.js';

const quiet = { addMetric: () => undefined, hasStoredMetrics: () => false, publishStoredMetrics: () => undefined } as never;
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as never;
/** Noon, UTC: the daily sweep is half a day away either side. */
const NOON = Date.UTC(2026, 0, 10, 12);

let services: ServiceSet | undefined;
const saved = { ...process.env };
let dynamo: DynamoDBClient;
let sqs: SQSClient;
const tables: string[] = [];
const queues: string[] = [];

beforeAll(async () => {
  services = await startServices({ postgres: true, dynamodb: true, sqs: true });
  Object.assign(process.env, services.env);
  dynamo = new DynamoDBClient({});
  sqs = sqsClient();
});

afterAll(async () => {
  for (const t of tables) await dynamo.send(new DeleteTableCommand({ TableName: t })).catch(() => undefined);
  for (const q of queues) await sqs.send(new DeleteQueueCommand({ QueueUrl: q })).catch(() => undefined);
  dynamo?.destroy();
  sqs?.destroy();
  await services?.stop();
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
  Object.assign(process.env, saved);
});

/** A flags table as the stack declares it (infra/aurora.ts). */
async function flagsTable(): Promise<string> {
  const name = uniqueName('activity');
  await dynamo.send(
    new CreateTableCommand({
      TableName: name,
      KeySchema: [{ AttributeName: 'flag', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'flag', AttributeType: 'S' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  tables.push(name);
  return name;
}

async function queue(prefix: string): Promise<string> {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: uniqueName(prefix), Attributes: { VisibilityTimeout: '180' } }));
  queues.push(QueueUrl!);
  return QueueUrl!;
}

/** The flags as one sandbox sees them, on a clock the test moves. */
function sandbox(table: string, clock: { now: number }): ActivityFlags {
  return new ActivityFlags(dynamo, table, { now: () => clock.now });
}

describe('activity flags', () => {
  it('a missing flag counts as raised; finding nothing lowers it, and then the probe leaves the database alone', async () => {
    const clock = { now: NOON };
    const flags = sandbox(await flagsTable(), clock);
    const first = await flags.probe('promotion');
    expect(first).toMatchObject({ skip: false, reason: 'missing' });
    await first.nothingLeft();
    expect(await flags.read('promotion')).toMatchObject({ exists: true, raised: false, loweredAt: NOON });
    clock.now += 60_000;
    expect(await flags.probe('promotion')).toMatchObject({ skip: true, reason: 'lowered' });
    // Each flag is its own: the runs' is still missing.
    expect(await flags.probe('runs')).toMatchObject({ skip: false, reason: 'missing' });
  });

  it('a raise between the probe reading the flag and lowering it keeps it raised: work started meanwhile is looked at by the next probe', async () => {
    const clock = { now: NOON };
    const table = await flagsTable();
    const probe = sandbox(table, clock);
    const writer = sandbox(table, clock);
    await writer.raise(['promotion']);
    clock.now += RAISE_GRACE_MS + 1;
    const look = await probe.probe('promotion');
    expect(look).toMatchObject({ skip: false, reason: 'raised' });
    // The database said "nothing to do"; meanwhile another writer raised (before writing).
    await sandbox(table, clock).raise(['promotion']);
    await look.nothingLeft();
    expect((await probe.read('promotion')).raised).toBe(true);
    expect(await probe.probe('promotion')).toMatchObject({ skip: false, reason: 'raised' });
  });

  it('a flag raised within the grace before the probe read it stays raised (the writer may not have committed yet); past the grace it is lowered', async () => {
    const clock = { now: NOON };
    const table = await flagsTable();
    const probe = sandbox(table, clock);
    await sandbox(table, clock).raise(['runs']);
    clock.now += RAISE_GRACE_MS - 1;
    await (await probe.probe('runs')).nothingLeft();
    expect((await probe.read('runs')).raised).toBe(true);
    clock.now += 2;
    await (await probe.probe('runs')).nothingLeft();
    expect(await probe.read('runs')).toMatchObject({ raised: false, loweredAt: clock.now });
    expect((await probe.probe('runs')).skip).toBe(true);
  });

  it('once a UTC day a lowered flag is looked past (work written without raising it is found within a day), then left alone again', async () => {
    const clock = { now: NOON };
    const flags = sandbox(await flagsTable(), clock);
    await (await flags.probe('promotion')).nothingLeft();
    clock.now = Math.ceil(NOON / SWEEP_EVERY_MS) * SWEEP_EVERY_MS - 1;
    expect((await flags.probe('promotion')).skip).toBe(true);
    clock.now += 1;
    const sweep = await flags.probe('promotion');
    expect(sweep).toMatchObject({ skip: false, reason: 'sweep' });
    await sweep.nothingLeft();
    clock.now += 60_000;
    expect(await flags.probe('promotion')).toMatchObject({ skip: true, reason: 'lowered' });
  });

  it('a sandbox writes its raise again only once half the grace has passed (the flag is recent enough meanwhile)', async () => {
    const clock = { now: NOON };
    const table = await flagsTable();
    const writer = sandbox(table, clock);
    await writer.raise(['promotion', 'runs']);
    clock.now += RAISE_GRACE_MS / 2 - 1;
    await writer.raise(['promotion', 'runs']);
    expect(await writer.read('promotion')).toMatchObject({ version: 1, raisedAt: NOON });
    clock.now += 1;
    await writer.raise(['promotion']);
    expect(await writer.read('promotion')).toMatchObject({ version: 2, raisedAt: clock.now });
    expect((await writer.read('runs')).version).toBe(1);
  });

  it('a flag that cannot be read counts as raised, and is never lowered', async () => {
    const clock = { now: NOON };
    const flags = sandbox(uniqueName('no-such-table'), clock);
    const look = await flags.probe('runs');
    expect(look).toMatchObject({ skip: false, reason: 'unreadable' });
    await expect(look.nothingLeft()).resolves.toBeUndefined();
  });
});

describe('on PostgreSQL: the probes, the writers and the pools', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  beforeAll(async () => {
    db = await freshDatabase('idle_probes');
  });
  afterAll(() => db?.drop());

  /** The runtimes a deployed function opens, kept so the test can see what became of their pools. */
  function deployed() {
    const runtimes: Runtime[] = [];
    const scoped = invocationScoped(async () => {
      const rt = await runtimeFrom(
        { ROLLOUT_STORE: 'postgres', DATABASE_URL: db.url, ROLLOUT_NODE_ID: 'idle-test', ROLLOUT_TICK_INTERVAL_MS: '1000' },
        { bus: new InProcessBus(), logger: silent },
      );
      runtimes.push(rt);
      return rt;
    });
    return {
      scoped,
      opened: () => runtimes.length,
      /** Every pool it opened has ended (pg-pool refuses a query after end(), which resolves once each connection has closed). */
      allEnded: async () =>
        (
          await Promise.all(
            runtimes.map((rt) =>
              rt.stores.sql!.query('SELECT 1').then(
                () => false,
                (err: Error) => /after calling end/.test(err.message),
              ),
            ),
          )
        ).every(Boolean),
    };
  }

  const post = (path: string, body: unknown) =>
    ({
      version: '2.0',
      routeKey: 'POST /{proxy+}',
      rawPath: path,
      rawQueryString: '',
      headers: { 'content-type': 'application/json' },
      isBase64Encoded: false,
      body: JSON.stringify(body),
      requestContext: {
        http: { method: 'POST', path, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'test' },
        requestId: uniqueName('req'),
        authorizer: { iam: { userArn: 'arn:aws:iam::000000000000:user/alice' } },
      },
    }) as unknown as APIGatewayProxyEventV2WithIAMAuthorizer;

  it('the batch promoter leaves the database alone while its flag is lowered; a rollout created through the API raises it first, and the next invocation ticks it; no invocation leaves a connection open', async () => {
    const table = await flagsTable();
    const batchFn = deployed();
    const batch = batchFn.scoped.around(batchPromoterHandler(batchFn.scoped.runtime, silent, quiet, { activity: new ActivityFlags(dynamo, table) }));
    const once = { getRemainingTimeInMillis: () => 0 };

    // No flag yet: it looks, finds nothing, lowers the flag; its pool ended with the invocation.
    expect(await batch({}, once)).toMatchObject({ idle: true, ticks: 0 });
    expect(batchFn.opened()).toBe(1);
    expect(await batchFn.allEnded()).toBe(true);
    // Lowered: the schedule's invocations open nothing.
    expect(await batch({}, once)).toMatchObject({ idle: true });
    expect(batchFn.opened()).toBe(1);

    // The API raises the flags (a sandbox of its own) before it writes the rollout.
    const apiFn = deployed();
    const api = apiFn.scoped.around(apiLambdaHandler(apiFn.scoped.runtime, { activity: new ActivityFlags(dynamo, table) }, silent, quiet));
    const created = await api(
      post('/rollouts', {
        spec: {
          target: { service: 'checkout', version: 'v2' },
          stages: [
            { name: 'canary', percent: 10, bakeSeconds: 600 },
            { name: 'all', percent: 100, bakeSeconds: 0 },
          ],
        },
      }),
      undefined,
    );
    expect(created.statusCode, String(created.body)).toBe(201);
    expect(apiFn.opened()).toBe(1);
    expect(await apiFn.allEnded()).toBe(true);

    const ticked = await batch({}, once);
    expect(ticked).toMatchObject({ idle: false, leader: true });
    expect(ticked.ticks).toBeGreaterThanOrEqual(1);
    expect(batchFn.opened()).toBe(2);
    expect(await batchFn.allEnded()).toBe(true);
    // Work left (the rollout bakes): the flag stays raised, and the next invocation ticks again.
    expect((await new ActivityFlags(dynamo, table).read('promotion')).raised).toBe(true);
    expect(await batch({}, once)).toMatchObject({ idle: false });
  });

  it("the coordinator's scan drains the work DLQ, with or without its flag: a dead letter's item fails, a malformed one is dropped, one of a run another stack coordinates stays", async () => {
    const table = await flagsTable();
    const [dlqUrl, workUrl] = await Promise.all([queue('work-dlq'), queue('work')]);
    const fn = deployed();
    const flags = new ActivityFlags(dynamo, table);
    const coordinator = fn.scoped.around(
      coordinatorHandler(
        fn.scoped.runtime,
        {
          onFenced: () => undefined,
          bus: new InProcessBus(),
          queue: () => new SqsWorkQueue(sqs, workUrl),
          deadLetters: { sqs, queueUrl: dlqUrl },
          activity: flags,
          maxReceiveCount: 5,
        },
        silent,
        quiet,
      ),
    );

    // Idle: the DLQ is polled, the flag read and lowered once; after that nothing opens the database.
    await coordinator({ action: 'scan-all' }, undefined);
    await coordinator({ action: 'scan-all' }, undefined);
    expect(fn.opened()).toBe(1);
    expect((await flags.read('runs')).raised).toBe(false);

    // Dead letters arrive; the flag stays lowered (no run was created through the stack): the drain still settles them.
    const rt: Runtime = await runtimeFrom(
      { ROLLOUT_STORE: 'postgres', DATABASE_URL: db.url, ROLLOUT_NODE_ID: 'idle-test' },
      { bus: new InProcessBus(), logger: silent },
    );
    try {
      const { ledger } = rt.stores;
      const ours = uniqueName('run');
      const theirs = uniqueName('run');
      for (const r of [ours, theirs]) await ledger.createRun(r, {}, Date.now());
      const [mine] = (await ledger.enqueue(ours, [{ poison: 1 }], Date.now())).ids;
      const [other] = (await ledger.enqueue(theirs, [{ poison: 2 }], Date.now())).ids;
      await new LeaseElector(rt.stores.runLeases(theirs), {
        name: coordinatorLease(theirs),
        holderId: 'other-stack',
        ttlMs: 30_000,
        renewIntervalMs: 10_000,
        retryIntervalMs: 5_000,
      }).campaign();
      const dlq = new SqsWorkQueue(sqs, dlqUrl);
      await dlq.send(ours, [mine!]);
      await dlq.send(theirs, [other!]);
      await sqs.send(new SendMessageCommand({ QueueUrl: dlqUrl, MessageBody: 'not json' }));

      await coordinator({ action: 'scan-all' }, undefined);
      const failed = (await ledger.get(ours, mine!))!;
      expect(failed.state).toBe('failed');
      expect(failed.error).toMatch(/^poison: delivered 5 times/);
      expect((await ledger.get(theirs, other!))!.state).toBe('pending');
      // Settled and malformed letters are gone; the other stack's is kept, hidden until a later scan.
      const attrs = (
        await sqs.send(
          new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
        )
      ).Attributes!;
      expect([Number(attrs.ApproximateNumberOfMessages), Number(attrs.ApproximateNumberOfMessagesNotVisible)]).toEqual([0, 1]);
      expect(fn.opened()).toBe(2);
      expect(await fn.allEnded()).toBe(true);
    } finally {
      await rt.close();
    }
  });
});
