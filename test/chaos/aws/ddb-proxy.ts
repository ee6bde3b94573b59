/**
 * An HTTP proxy in front of DynamoDB Local that every process of an AWS
 * chaos schedule talks to (AWS_ENDPOINT_URL_DYNAMODB points here). It has
 * two jobs, and owes nothing to the project's store code for either: it
 * reads only the JSON on the wire and reads DynamoDB Local with its own
 * plain client.
 *
 * 1. The nemesis' store faults, answered in DynamoDB's own error shapes so
 *    the SDK's retries and the project's conflict handling run as in AWS:
 *    throttling (ProvisionedThroughputExceededException / ThrottlingException),
 *    cancelled transactions with `TransactionConflict` reasons, requests from
 *    one client held back (a partition whose requests land late), and a
 *    client killed while its write is in flight (the write then committed or
 *    not).
 *
 * 2. The independent observer. Writes go to DynamoDB Local one at a time, so
 *    what the observer reads right after a write committed is the state that
 *    write committed into. For every write that touches a lease, rollout,
 *    stage or work item it keeps each item's image before and after (from the
 *    request itself for a PutItem, ReturnValues when asked for, else a
 *    consistent GetItem), and for a write fenced by a ConditionCheck on a
 *    lease item it reads that lease item after the commit. From these it
 *    records every lease change, every fenced write with the lease row at
 *    commit, and every stage, rollout and item transition, in commit order.
 *    Reads are forwarded as they come: they change nothing.
 *
 * A client is named by the app id of its SDK user agent (AWS_SDK_UA_APP_ID),
 * which the harness sets per process.
 */
import { BatchGetItemCommand, DynamoDBClient, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { forwardHttp, type Forwarded } from '../../support/http-forward.js';
import type { FencedWrite, ItemState, ItemTransition, LeaseChange, LeaseRef, RolloutTransition, StagePhase, StageTransition } from '../history.js';
import { runOfKey } from '../../../shared/adapters/dynamodb/ledger-keys.js';
import { closeNow, listenOnLoopback, withBody } from '../../support/local-server.js';

type Wire = Record<string, AttributeValue>;
type Plain = Record<string, unknown>;

export interface StoreFaults {
  /** Share of requests refused as throttled (any operation). */
  readonly throttle: number;
  /** Share of TransactWriteItems cancelled with a TransactionConflict reason. */
  readonly conflict: number;
}

export interface ProxyStats {
  requests: number;
  writes: number;
  observed: number;
  throttled: number;
  conflicts: number;
  held: number;
  stragglers: number;
  killedMidWrite: number;
}

/** What a kill-on-write does with the write it caught, once the client is dead. */
export type MidWriteFate = 'commit' | 'drop';

interface Action {
  readonly kind: 'Put' | 'Update' | 'Delete' | 'ConditionCheck';
  readonly table: string;
  readonly key: Wire;
  readonly body: Plain;
}

const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'TransactWriteItems']);
const JSON_HEADERS = { 'content-type': 'application/x-amz-json-1.0' };

/** The kind of item a key names, by the single-table layout (shared/adapters/dynamodb). */
type Kind =
  | { kind: 'lease'; name: string }
  | { kind: 'rollout'; rolloutId: string }
  | { kind: 'stage'; rolloutId: string }
  | { kind: 'event'; rolloutId: string }
  | { kind: 'item'; runId: string; itemId: string }
  | { kind: 'other' };

function kindOf(key: Wire): Kind {
  const pk = key.pk?.S ?? '';
  const sk = key.sk?.S ?? '';
  if (pk.startsWith('LEASE#') && sk === 'LEASE') return { kind: 'lease', name: pk.slice('LEASE#'.length) };
  if (pk.startsWith('ROLLOUT#') && sk === 'ROLLOUT') return { kind: 'rollout', rolloutId: pk.slice('ROLLOUT#'.length) };
  if (pk.startsWith('ROLLOUT#') && sk.startsWith('STAGE#')) return { kind: 'stage', rolloutId: pk.slice('ROLLOUT#'.length) };
  if (pk.startsWith('ROLLOUT#') && sk.startsWith('EVENT#')) return { kind: 'event', rolloutId: pk.slice('ROLLOUT#'.length) };
  // A run's items may be spread over shards (RUN#<run>#<shard>): the run is the key without its shard.
  if (pk.startsWith('RUN#') && sk.startsWith('ITEM#')) return { kind: 'item', runId: runOfKey(pk), itemId: sk.slice('ITEM#'.length) };
  return { kind: 'other' };
}

const keyString = (table: string, key: Wire) => `${table}|${key.pk?.S ?? ''}|${key.sk?.S ?? ''}`;
const keyOnly = (item: Wire): Wire => ({ pk: item.pk!, sk: item.sk! });

function actionsOf(op: string, input: Plain): Action[] {
  const table = typeof input.TableName === 'string' ? input.TableName : '';
  switch (op) {
    case 'PutItem':
      return [{ kind: 'Put', table, key: keyOnly(input.Item as Wire), body: input }];
    case 'UpdateItem':
      return [{ kind: 'Update', table, key: input.Key as Wire, body: input }];
    case 'DeleteItem':
      return [{ kind: 'Delete', table, key: input.Key as Wire, body: input }];
    case 'TransactWriteItems':
      return (input.TransactItems as Record<string, Plain>[]).map((entry) => {
        const [kind, a] = Object.entries(entry)[0] as [Action['kind'], Plain];
        const t = typeof a.TableName === 'string' ? a.TableName : '';
        return { kind, table: t, key: kind === 'Put' ? keyOnly(a.Item as Wire) : (a.Key as Wire), body: a };
      });
    default:
      return [];
  }
}

/** The holder and epoch a fence ConditionCheck compares the lease item with, read from its expression. */
function fenceClaim(check: Action): { holder: string | null; epoch: number | null } {
  const expr = typeof check.body.ConditionExpression === 'string' ? check.body.ConditionExpression : '';
  const values = (check.body.ExpressionAttributeValues ?? {}) as Wire;
  const names = (check.body.ExpressionAttributeNames ?? {}) as Record<string, string>;
  const operand = (attr: string): AttributeValue | undefined => {
    for (const m of expr.matchAll(/([#\w]+)\s*=\s*(:\w+)/g)) {
      const name = m[1]!.startsWith('#') ? names[m[1]!] : m[1];
      if (name === attr) return values[m[2]!];
    }
    return undefined;
  };
  const h = operand('holder');
  const e = operand('epoch');
  return { holder: h?.S ?? null, epoch: e?.N !== undefined ? Number(e.N) : null };
}

const num = (v: unknown): number | null => (v === undefined || v === null ? null : Number(v));
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** A seeded source of [0, 1). */
export type Random = () => number;

export class ObservingProxy {
  private server: Server | undefined;
  private faults: StoreFaults = { throttle: 0, conflict: 0 };
  private readonly holds: { prefix: string; released: Promise<void> }[] = [];
  private killArm: {
    match: (client: string, op: string, touches: readonly string[]) => boolean;
    kill: (client: string) => Promise<MidWriteFate>;
    caught: (client: string, op: string, fate: MidWriteFate) => void;
  } | null = null;
  /** The one write in flight to DynamoDB Local at a time. */
  private turn: Promise<void> = Promise.resolve();
  /** Each observed item as it stands after the last write the observer saw (writes are serialised, so it is exact). */
  private readonly images = new Map<string, Plain | null>();
  private readonly reader: DynamoDBClient;
  private seq = 0;
  private readonly inFlight = new Set<Promise<void>>();

  readonly stats: ProxyStats = { requests: 0, writes: 0, observed: 0, throttled: 0, conflicts: 0, held: 0, stragglers: 0, killedMidWrite: 0 };
  readonly leaseChanges: LeaseChange[] = [];
  readonly writes: FencedWrite[] = [];
  readonly stageTransitions: StageTransition[] = [];
  readonly rolloutTransitions: RolloutTransition[] = [];
  readonly itemTransitions: ItemTransition[] = [];
  /** Requests per client (by app id), for the summary. */
  readonly clients = new Map<string, number>();
  url = '';

  constructor(
    private readonly upstream: URL,
    private readonly o: { readonly now: () => number; readonly random: Random },
  ) {
    this.reader = new DynamoDBClient({
      endpoint: upstream.toString(),
      region: process.env.AWS_REGION ?? 'us-east-1',
      credentials: { accessKeyId: 'observer', secretAccessKey: 'observer' },
    });
  }

  async start(): Promise<this> {
    this.server = createServer(
      withBody((req, res, body) => {
        const p = this.handle(req, res, body).catch((err: unknown) => {
          if (!res.headersSent && !res.destroyed)
            res.writeHead(500, JSON_HEADERS).end(JSON.stringify({ __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: String(err) }));
        });
        this.inFlight.add(p);
        void p.finally(() => this.inFlight.delete(p));
      }),
    );
    // SDK clients keep connections alive; a held request may wait for seconds.
    this.server.keepAliveTimeout = 60_000;
    this.server.requestTimeout = 0;
    this.url = await listenOnLoopback(this.server);
    return this;
  }

  async stop(): Promise<void> {
    for (const h of this.holds.splice(0)) void h;
    await closeNow(this.server);
    this.reader.destroy();
  }

  setFaults(f: StoreFaults): void {
    this.faults = f;
  }

  /** Requests from clients whose name starts with `prefix` wait until `release` is called; then they go on, late. */
  hold(prefix: string): () => void {
    let release!: () => void;
    const h = { prefix, released: new Promise<void>((r) => (release = r)) };
    this.holds.push(h);
    return () => {
      const i = this.holds.indexOf(h);
      if (i >= 0) this.holds.splice(i, 1);
      release();
    };
  }

  /**
   * The next write of a client that `match`es (by its name, the operation, and
   * the kinds of item it writes: lease, rollout, stage, item, other) is caught before it reaches
   * DynamoDB Local; `kill` kills that client and says whether the write then
   * commits (it was already on its way) or is lost.
   */
  killOnNextWrite(
    match: (client: string, op: string, touches: readonly string[]) => boolean,
    kill: (client: string) => Promise<MidWriteFate>,
  ): Promise<{ client: string; op: string; fate: MidWriteFate }> {
    return new Promise((resolve) => {
      this.killArm = { match, kill, caught: (client, op, fate) => resolve({ client, op, fate }) };
    });
  }

  disarm(): void {
    this.killArm = null;
  }

  private straggler: {
    match: (client: string, op: string, touches: readonly string[], fenced: boolean) => boolean;
    caught: (c: { client: string; op: string }) => void;
    release: Promise<void>;
  } | null = null;

  /**
   * The next write that `match`es is held back (not sent to DynamoDB Local)
   * until `deliver` is called: a write delivered late, after its writer may
   * have lost its lease.
   */
  holdNextWrite(match: (client: string, op: string, touches: readonly string[], fenced: boolean) => boolean): {
    caught: Promise<{ client: string; op: string }>;
    deliver: () => void;
    cancel: () => void;
  } {
    let deliver!: () => void;
    const release = new Promise<void>((r) => (deliver = r));
    let caught!: (c: { client: string; op: string }) => void;
    const got = new Promise<{ client: string; op: string }>((r) => (caught = r));
    this.straggler = { match, caught, release };
    return {
      caught: got,
      deliver,
      cancel: () => {
        if (this.straggler?.release === release) this.straggler = null;
        deliver();
      },
    };
  }

  /** The lease row as it stands (a plain consistent read), for the nemesis to aim at the leader. */
  async leaseRow(table: string, name: string): Promise<{ holder: string | null; epoch: number } | null> {
    const got = await this.read([{ table, key: { pk: { S: `LEASE#${name}` }, sk: { S: 'LEASE' } } }]);
    const row = [...got.values()][0];
    return row ? { holder: str(row.holder), epoch: Number(row.epoch) } : null;
  }

  /** Every request received so far has been answered (or dropped). */
  async idle(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  private async handle(req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> {
    const op = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? '';
    const ua = `${String(req.headers['x-amz-user-agent'] ?? '')} ${String(req.headers['user-agent'] ?? '')}`;
    // Powertools appends its own marker to the app id (`-PT-…`): the name is what comes before it.
    const client = (/\bapp\/(\S+)/.exec(ua)?.[1] ?? 'unnamed').replace(/-PT-.*$/, '');
    this.stats.requests++;
    this.clients.set(client, (this.clients.get(client) ?? 0) + 1);

    for (const h of [...this.holds]) {
      if (!client.startsWith(h.prefix)) continue;
      this.stats.held++;
      await h.released;
    }

    const reply = (status: number, headers: IncomingHttpHeaders, payload: Buffer | string) => {
      if (res.destroyed) return; // the client died while this request was held or in flight
      res.writeHead(status, headers as Record<string, string>).end(payload);
    };

    const injected = this.inject(op, body);
    if (injected) return reply(400, JSON_HEADERS, JSON.stringify(injected));

    if (!WRITES.has(op)) {
      const r = await this.forward(req.headers, body, req.method ?? 'POST', req.url ?? '/');
      return reply(r.status, r.headers, r.body);
    }

    this.stats.writes++;
    let fate: MidWriteFate = 'commit';
    const arm = this.killArm;
    const late = this.straggler;
    const parsed = arm || late ? actionsOf(op, JSON.parse(body.toString('utf8')) as Plain) : [];
    const touches = parsed.filter((a) => a.kind !== 'ConditionCheck').map((a) => kindOf(a.key).kind);
    const fenced = parsed.some((a) => a.kind === 'ConditionCheck' && kindOf(a.key).kind === 'lease');
    if (late && late.match(client, op, touches, fenced)) {
      this.straggler = null;
      this.stats.stragglers++;
      late.caught({ client, op });
      await late.release;
    }
    if (arm && arm.match(client, op, touches)) {
      this.killArm = null;
      this.stats.killedMidWrite++;
      fate = await arm.kill(client);
      arm.caught(client, op, fate);
      if (fate === 'drop') {
        res.destroy();
        return;
      }
    }
    const r = await this.write(op, body, () => this.forward(req.headers, body, req.method ?? 'POST', req.url ?? '/'));
    return reply(r.status, r.headers, r.body);
  }

  /** A fault to answer instead of forwarding, in DynamoDB's JSON error shape; null to forward. */
  private inject(op: string, body: Buffer): Plain | null {
    if (this.faults.throttle > 0 && this.o.random() < this.faults.throttle) {
      this.stats.throttled++;
      return this.o.random() < 0.5
        ? {
            __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
            message:
              'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.',
          }
        : { __type: 'com.amazon.coral.availability#ThrottlingException', message: 'Rate of requests exceeds the allowed throughput.' };
    }
    if (op === 'TransactWriteItems' && this.faults.conflict > 0 && this.o.random() < this.faults.conflict) {
      this.stats.conflicts++;
      const actions = actionsOf(op, JSON.parse(body.toString('utf8')) as Plain);
      // The item another transaction holds: the lease item a fence checks, when there is one (that is where writers meet).
      let at = actions.findIndex((a) => a.kind === 'ConditionCheck' && kindOf(a.key).kind === 'lease');
      if (at < 0) at = Math.floor(this.o.random() * actions.length);
      const codes = actions.map((_, i) => (i === at ? 'TransactionConflict' : 'None'));
      return {
        __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
        Message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(', ')}]`,
        CancellationReasons: codes.map((Code) => (Code === 'None' ? { Code } : { Code, Message: 'Transaction is ongoing for the item' })),
      };
    }
    return null;
  }

  /** One write at a time: its items before, the write, what it committed. */
  private async write(op: string, body: Buffer, send: () => Promise<Forwarded>): Promise<Forwarded> {
    const previous = this.turn;
    let done!: () => void;
    this.turn = new Promise<void>((r) => (done = r));
    await previous;
    try {
      const input = JSON.parse(body.toString('utf8')) as Plain;
      const actions = actionsOf(op, input);
      // Outbox events matter as they are written; marking one published changes nothing the history follows.
      const watched = actions.filter(
        (a) => a.kind !== 'ConditionCheck' && kindOf(a.key).kind !== 'other' && (a.kind === 'Put' || kindOf(a.key).kind !== 'event'),
      );
      if (!watched.length) return await send();
      const before = await this.imagesOf(watched);
      let r: Forwarded;
      try {
        r = await send();
      } catch (err) {
        // No answer: it may have committed. Forget what we knew, so the next look reads it.
        for (const a of watched) this.images.delete(keyString(a.table, a.key));
        await this.settleUnknown(watched, before);
        throw err;
      }
      if (r.status !== 200) {
        // DynamoDB applied nothing (a failed condition, a cancelled transaction); a 5xx may have: read it back.
        if (r.status >= 500) await this.settleUnknown(watched, before);
        return r;
      }
      this.stats.observed++;
      const after = await this.afterImages(op, watched, r.body);
      const fence = actions.find((a) => a.kind === 'ConditionCheck' && kindOf(a.key).kind === 'lease') ?? null;
      // An unfenced write of a rollout or stage is still judged against promotion_leader as it stood at commit.
      const leased = watched.some((a) => ['rollout', 'stage', 'event'].includes(kindOf(a.key).kind));
      const leaseKey =
        fence ??
        (leased
          ? { kind: 'ConditionCheck' as const, table: watched[0]!.table, key: { pk: { S: 'LEASE#promotion_leader' }, sk: { S: 'LEASE' } }, body: {} }
          : null);
      const lease = leaseKey ? await this.readLease(leaseKey) : null;
      this.record(watched, before, after, fence, lease);
      return r;
    } finally {
      done();
    }
  }

  /** A write whose outcome we did not see: compare what is there now with before, and record what changed. */
  private async settleUnknown(watched: readonly Action[], before: ReadonlyMap<string, Plain | null>): Promise<void> {
    const now = await this.read(watched.map((a) => ({ table: a.table, key: a.key })));
    this.record(watched, before, now, null, null);
  }

  private async imagesOf(actions: readonly Action[]): Promise<Map<string, Plain | null>> {
    const out = new Map<string, Plain | null>();
    const missing: { table: string; key: Wire }[] = [];
    for (const a of actions) {
      const k = keyString(a.table, a.key);
      // An outbox event is a new item every time (its id names the rollout version it was made at).
      if (a.kind === 'Put' && kindOf(a.key).kind === 'event') out.set(k, null);
      else if (this.images.has(k)) out.set(k, this.images.get(k)!);
      else missing.push({ table: a.table, key: a.key });
    }
    if (missing.length) for (const [k, v] of await this.read(missing)) out.set(k, v);
    return out;
  }

  /** After a committed write: a PutItem's item is what it wrote, a DeleteItem leaves nothing, an update is read back (or taken from ReturnValues). */
  private async afterImages(op: string, watched: readonly Action[], response: Buffer): Promise<Map<string, Plain | null>> {
    const out = new Map<string, Plain | null>();
    const reread: { table: string; key: Wire }[] = [];
    for (const a of watched) {
      const k = keyString(a.table, a.key);
      if (a.kind === 'Put') out.set(k, unmarshall(a.body.Item as Wire));
      else if (a.kind === 'Delete') out.set(k, null);
      else if (op === 'UpdateItem' && a.body.ReturnValues === 'ALL_NEW') {
        const attrs = (JSON.parse(response.toString('utf8')) as { Attributes?: Wire }).Attributes;
        if (attrs) out.set(k, unmarshall(attrs));
        else reread.push({ table: a.table, key: a.key });
      } else reread.push({ table: a.table, key: a.key });
    }
    if (reread.length) for (const [k, v] of await this.read(reread)) out.set(k, v);
    return out;
  }

  private async readLease(check: Action): Promise<Plain | null> {
    const got = await this.read([{ table: check.table, key: check.key }]);
    return got.get(keyString(check.table, check.key)) ?? null;
  }

  /** Consistent reads with the observer's own client, straight from DynamoDB Local. */
  private async read(keys: readonly { table: string; key: Wire }[]): Promise<Map<string, Plain | null>> {
    const out = new Map<string, Plain | null>();
    for (const k of keys) out.set(keyString(k.table, k.key), null);
    const byTable = new Map<string, Wire[]>();
    for (const k of keys) byTable.set(k.table, [...(byTable.get(k.table) ?? []), k.key]);
    let request: Record<string, { Keys: Wire[]; ConsistentRead: boolean }> = Object.fromEntries(
      [...byTable].map(([t, ks]) => [t, { Keys: dedupe(ks), ConsistentRead: true }]),
    );
    for (let round = 0; Object.keys(request).length; round++) {
      if (round > 20) throw new Error('observer: BatchGetItem left keys unprocessed 20 times');
      const res = await this.reader.send(new BatchGetItemCommand({ RequestItems: request }));
      for (const [table, items] of Object.entries(res.Responses ?? {})) for (const item of items) out.set(keyString(table, keyOnly(item)), unmarshall(item));
      request = (res.UnprocessedKeys ?? {}) as typeof request;
    }
    return out;
  }

  private record(
    watched: readonly Action[],
    before: ReadonlyMap<string, Plain | null>,
    after: ReadonlyMap<string, Plain | null>,
    fence: Action | null,
    lease: Plain | null,
  ): void {
    const at = this.o.now();
    const claim = fence ? fenceClaim(fence) : null;
    const fenceName = fence ? (kindOf(fence.key) as { name: string }).name : null;
    const current: LeaseRef | null = lease ? { holder: str(lease.holder), epoch: Number(lease.epoch) } : null;
    for (const a of watched) {
      const k = keyString(a.table, a.key);
      const b = before.get(k) ?? null;
      const n = after.has(k) ? after.get(k)! : b;
      this.images.set(k, n);
      const kind = kindOf(a.key);
      if (kind.kind === 'event') {
        this.images.delete(k);
        // Each transition writes its outbox events in the same atomic step, each carrying the epoch it was made under.
        if (b === null && n !== null) {
          const detail = (n.detail ?? {}) as Plain;
          this.writes.push({
            seq: ++this.seq,
            at,
            table: TABLE_NAMES.event,
            key: `${kind.rolloutId}/${String(n.detailType)}`,
            lease: fenceName ?? 'promotion_leader',
            current,
            claimed: typeof detail.epoch === 'number' ? { holder: null, epoch: detail.epoch } : null,
            before: null,
            after: { detailType: n.detailType, actor: detail.actor ?? null },
          });
        }
        continue;
      }
      if (kind.kind === 'lease') {
        if (changed(b, n, ['holder', 'epoch', 'expiresAt', 'version']) || (b === null) !== (n === null)) {
          const row = n ?? b!;
          this.leaseChanges.push({
            seq: ++this.seq,
            at,
            name: kind.name,
            change: b === null ? 'insert' : n === null ? 'delete' : 'update',
            holder: n ? str(n.holder) : null,
            epoch: Number(row.epoch),
            expiresAt: n ? num(n.expiresAt) : null,
          });
        }
        continue;
      }
      if (b === null && n === null) continue;
      // A write under a lease: any the store fenced, and every change of an existing rollout or stage
      // (those are only ever made by a promoter or a command, under promotion_leader; one that carries no
      // fence is a finding, not a thing to leave out).
      const leaseName = fenceName ?? ((kind.kind === 'rollout' || kind.kind === 'stage') && b !== null ? 'promotion_leader' : null);
      if (leaseName) {
        const row = n ?? b!;
        this.writes.push({
          seq: ++this.seq,
          at,
          table: TABLE_NAMES[kind.kind],
          key: writeKey(kind, row),
          lease: leaseName,
          current,
          claimed: claimOf(kind, b, n, claim),
          before: b,
          after: n,
        });
      }
      if (kind.kind === 'stage' && n && (b === null || b.phase !== n.phase)) {
        const promoted = n.phase === 'promoted' && n.promotedEpoch !== undefined && n.promotedEpoch !== null;
        this.stageTransitions.push({
          seq: ++this.seq,
          at,
          rolloutId: kind.rolloutId,
          attempt: Number(n.attempt),
          index: Number(n.index),
          from: b ? (b.phase as StagePhase) : null,
          to: n.phase as StagePhase,
          epoch: promoted ? Number(n.promotedEpoch) : (claim?.epoch ?? null),
          by: promoted ? str(n.promotedBy) : (claim?.holder ?? null),
        });
      }
      if (kind.kind === 'rollout' && n && (b === null || b.state !== n.state || b.attempt !== n.attempt)) {
        this.rolloutTransitions.push({
          seq: ++this.seq,
          at,
          rolloutId: kind.rolloutId,
          from: b ? { state: String(b.state), attempt: Number(b.attempt) } : null,
          to: { state: String(n.state), attempt: Number(n.attempt), reason: str(n.stateReason), by: str(n.stateBy) },
        });
      }
      if (kind.kind === 'item' && n && (b === null || changed(b, n, ['state', 'worker', 'started', 'resultHash', 'error', 'attempts']))) {
        this.itemTransitions.push({
          seq: ++this.seq,
          at,
          runId: kind.runId,
          itemId: kind.itemId,
          from: b ? { state: b.state as ItemState, worker: str(b.worker), started: Boolean(b.started) } : null,
          to: {
            state: n.state as ItemState,
            worker: str(n.worker),
            started: Boolean(n.started),
            resultHash: str(n.resultHash),
            error: str(n.error),
            attempts: Number(n.attempts ?? 0),
          },
        });
      }
    }
  }

  private forward(headers: IncomingHttpHeaders, body: Buffer, method: string, path: string): Promise<Forwarded> {
    return forwardHttp(this.upstream, headers, body, method, path);
  }
}

/**
 * The holder and epoch a write says it was made under: first what the row
 * itself records (a promotion's promotedBy/promotedEpoch, a steal's epoch on
 * the item, as the local topology reads them), else what its fence
 * ConditionCheck compared on the wire; null when it says neither.
 */
function claimOf(kind: Kind, b: Plain | null, n: Plain | null, fence: { holder: string | null; epoch: number | null } | null): LeaseRef | null {
  // promotedBy names the promoter (`promoter:<node>`), not the lease holder: the row vouches for the epoch only.
  if (kind.kind === 'stage' && n && n.phase === 'promoted' && b?.phase !== 'promoted' && n.promotedEpoch !== undefined && n.promotedEpoch !== null)
    return { holder: null, epoch: Number(n.promotedEpoch) };
  if (kind.kind === 'item' && n && b && n.state === 'running' && b.state === 'running' && n.worker !== b.worker && n.epoch !== undefined && n.epoch !== null)
    return { holder: fence?.holder ?? null, epoch: Number(n.epoch) };
  if (fence && fence.epoch !== null) return { holder: fence.holder, epoch: fence.epoch };
  return null;
}

function changed(a: Plain | null, b: Plain | null, fields: readonly string[]): boolean {
  if (!a || !b) return a !== b;
  return fields.some((f) => JSON.stringify(a[f] ?? null) !== JSON.stringify(b[f] ?? null));
}

function dedupe(keys: readonly Wire[]): Wire[] {
  const seen = new Set<string>();
  return keys.filter((k) => {
    const s = `${k.pk?.S}|${k.sk?.S}`;
    if (seen.has(s)) return false;
    seen.add(s);
    return true;
  });
}

/** The PostgreSQL table each kind of item corresponds to, so both topologies name writes alike. */
const TABLE_NAMES: Record<Kind['kind'], string> = {
  lease: 'leases',
  rollout: 'rollouts',
  stage: 'rollout_stages',
  event: 'rollout_events',
  item: 'work_items',
  other: '',
};

/** The row a write touched, named as the history names it: `rollout`, `rollout/attempt/stage`, `run/item`. */
function writeKey(kind: Kind, row: Plain): string {
  switch (kind.kind) {
    case 'rollout':
      return kind.rolloutId;
    case 'stage':
      return `${kind.rolloutId}/${Number(row.attempt)}/${Number(row.index)}`;
    case 'item':
      return `${kind.runId}/${kind.itemId}`;
    default:
      return '';
  }
}
