import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { crc32, gunzipSync } from 'node:zlib';
import { forwardHttp, type Forwarded } from './http-forward.js';
import { closeNow, listenOnLoopback, withBody } from './local-server.js';

/**
 * A THROTTLING SIMULATOR FOR TESTS AND BENCHMARKS — not DynamoDB, and not a
 * prediction of what AWS will bill or throttle to the unit.
 *
 * In AWS a partition serves at most about 1,000 write units and 3,000 read
 * units a second, and a GSI whose key is hot throttles the base-table writes
 * that would write it. DynamoDB Local never throttles. This HTTP proxy in front
 * of DynamoDB Local meters, per window (`windowMs`, 1 s by default) and per key,
 * the units each request consumes as DynamoDB counts them, and refuses a
 * request with DynamoDB's own throttling error when one of the keys it would
 * consume on is already at or over its limit in the current window. The limits
 * are per window and configurable, so a 2-core machine can reach them (e.g.
 * 1,000 WCU scaled down to 50). The unmodified AWS SDK sees the errors it
 * sees in AWS, so its retry and backoff run as there.
 *
 * A key is the table's partition key value (`RUN#abc`) or a GSI's partition
 * key value, named after its index (`gsi1:PENDING#abc`). Admission happens
 * before DynamoDB Local sees anything: a refused request applied nothing.
 * An admitted request reserves an estimate on its keys (so concurrent requests
 * see each other) and is charged its actual consumption once DynamoDB Local has
 * answered, so one large request can overdraw a key, as in DynamoDB.
 *
 * What is counted (developer guide, "DynamoDB item sizes and formats"
 * CapacityUnitCalculations.html; "DynamoDB read and write operations"
 * read-write-operations.html; GSI.html#GSI.ThroughputConsiderations;
 * transaction-apis.html#transaction-capacity-handling; the per-partition limits
 * in warm-throughput-scenarios.html / bp-partition-key-design.html):
 * - item size: attribute names + values; strings UTF-8 bytes; numbers about
 *   1 byte per 2 significant digits + 1; binary raw bytes; null/boolean 1;
 *   list/map 3 bytes + 1 per element (map element names count); sets the sum
 *   of their members. `itemSize()` below; checked byte for byte against
 *   DynamoDB Local's ReturnConsumedCapacity at the 1 KB boundary for every
 *   type (numbers: base-100 digits, +1 when negative; binary sets: +1 per
 *   member, as it counts them).
 * - writes: 1 unit per started 1 KB. PutItem and UpdateItem: the larger of the
 *   item before and after; DeleteItem: the deleted item (at least 1); a
 *   failed condition: the existing item's size, 1 if there is none.
 *   BatchWriteItem: each element on its own. TransactWriteItems: twice
 *   (prepare + commit) for every Put, Update and Delete; a ConditionCheck 2
 *   units whatever the item's size.
 * - reads: 1 unit per started 4 KB strongly consistent, half eventually
 *   consistent, twice transactional; a missing item still costs the minimum.
 *   GetItem / BatchGetItem element: that item. Query: the total size of the
 *   items read (before any filter or projection), rounded up once. A GSI
 *   query is eventually consistent and sized by index entries.
 * - GSI writes (charged on the GSI key, limit `gsiWcu`): a write that puts an
 *   item into the index costs its entry there, one that takes it out the old
 *   entry, one that changes the index key (partition or sort) a delete on the
 *   old key plus a put on the new one, one that only changes projected
 *   attributes one write of the larger entry; none if the index entry does not
 *   change. A transaction's index writes are doubled too.
 * - Where the documentation is silent (a transaction's index writes, a
 *   ConditionCheck) this follows DynamoDB Local's own ReturnConsumedCapacity,
 *   and agrees with it everywhere else but on a read of nothing: DynamoDB
 *   Local charges 0 for a Query that finds nothing and for a BatchGetItem key
 *   that is missing, where the documented minimum (1 unit, ½ eventually
 *   consistent) is kept here; and a delete of a missing item is 1 unit (×2 in
 *   a transaction) where DynamoDB Local says 2 in a batch and 1 in a
 *   transaction. (DynamoDB Local does not add up a transaction of several
 *   actions on one table — two 4-unit Puts report 8 — so the test compares
 *   single-action transactions.) The test compares the two on every kind of
 *   request.
 *
 * The errors, as DynamoDB sends them (API reference: ThrottlingReason,
 * ThrottlingException, ProvisionedThroughputExceededException,
 * TransactionCanceledException, BatchWriteItem, BatchGetItem; developer guide
 * "Diagnosing throttling"; and the SDK's own model of these shapes):
 * - on-demand table (the project's; the billing mode is read from
 *   DescribeTable): HTTP 400 `ThrottlingException`, `message` "Throughput
 *   exceeds the current capacity of your table or index…" (a GSI: "…for one
 *   or more global secondary indexes…"), the messages DynamoDB documents for
 *   throttled on-demand tables and GSIs and that on-demand users report with
 *   this exception; `throttlingReasons: [{ reason, resource }]` (the member
 *   name the SDK's model gives this exception) with reason `Table|Index` +
 *   `Read|Write` + `KeyRangeThroughputExceeded` and the table's or index's
 *   ARN;
 * - provisioned table: HTTP 400 `ProvisionedThroughputExceededException`,
 *   "The level of configured provisioned throughput for the table was
 *   exceeded…" (or "…for one or more global secondary indexes…"),
 *   `ThrottlingReasons` (same entries);
 * - TransactWriteItems / TransactGetItems: `TransactionCanceledException`,
 *   one CancellationReason per action in order: `ThrottlingError` (on-demand)
 *   or `ProvisionedThroughputExceeded` with DynamoDB's message on the actions
 *   that touch a hot key, `None` (no message) on the others;
 * - BatchWriteItem / BatchGetItem: the elements on hot keys come back in
 *   `UnprocessedItems` / `UnprocessedKeys` and the rest is applied; when every
 *   element is on a hot key, the throttling exception above.
 *
 * The shadow. To size UpdateItem and transactions and to know which index keys
 * a write leaves, the proxy keeps, per item it has seen, its size and its
 * index entries (key, size, digest of the projected attributes). It learns
 * from what passes: PutItem items, ALL_OLD / ALL_NEW answers, items returned
 * by reads, and after an UpdateItem (or a transaction's Update) a consistent
 * GetItem / BatchGetItem of the new image; such helper requests are not
 * metered (`totals.helperRequests` counts them). What it can miss:
 * - items written around the proxy (straight to DynamoDB Local, or before it
 *   started) are taken as absent until a write or a read through the proxy
 *   shows them: their first write is charged as a new item's, and a hot GSI
 *   key they are under is not seen on that first write;
 * - concurrent writes to one item may be charged from each other's images
 *   (the helper read sees whatever is there when it runs);
 * - before an UpdateItem, its new GSI key is predicted from plain
 *   `SET key = :value` / `REMOVE key` in the UpdateExpression; any other form
 *   is taken to leave the key as it was (the charge afterwards is exact);
 * - a Query's items that its filter dropped or its projection cut to
 *   unrecognisable are charged at the mean size of the shadow's items under
 *   that key.
 *
 * Simplified or not modelled: a key is a partition (DynamoDB puts many keys on
 * one partition, splits hot ones for heat and caps a partition, not a key);
 * fixed windows, not DynamoDB's token buckets; no burst credits (300 s of
 * unused capacity), no adaptive capacity, no split for heat, no table-level,
 * account-level or on-demand maximum throughput, no 2× previous-peak rule for
 * on-demand tables; reads and writes are metered apart (DynamoDB can also
 * throttle a partition on their combination); LSIs, Scan, PartiQL
 * (ExecuteStatement…) and TTL deletes are passed through unmetered; a
 * transaction DynamoDB Local cancels (a failed condition) is charged its
 * prepare phase only (1× per action, an assumption); the error `__type`
 * namespace is the one DynamoDB's JSON protocol uses for its exceptions (the
 * SDK reads only the name after '#'); no `Retry-After`, as DynamoDB sends
 * none. Both SDK retry paths are DynamoDB's: it retries ThrottlingException
 * and ProvisionedThroughputExceededException itself, while a cancelled
 * transaction and unprocessed batch elements are the caller's to retry.
 */

/** An attribute value in DynamoDB's JSON protocol ({"S": "…"}, {"N": "1"}, {"M": {…}}…). */
export type AttributeValue = Record<string, unknown>;
/** An item in DynamoDB's JSON protocol. */
export type WireItem = Record<string, AttributeValue>;

export interface ThrottleLimits {
  /** Write units one table partition key may consume per window (AWS: 1,000 a second). */
  readonly partitionWcu: number;
  /** Read units one table partition key may consume per window (AWS: 3,000 a second). */
  readonly partitionRcu: number;
  /** Write units one GSI partition key may consume per window (default: partitionWcu). */
  readonly gsiWcu?: number;
  /** Read units one GSI partition key may consume per window (default: partitionRcu). */
  readonly gsiRcu?: number;
  /** The metering window (default 1,000 ms: the limits are per second). */
  readonly windowMs?: number;
}

export interface ThrottleOptions {
  /** A key's family for `stats().families`: its partition key value with the ids replaced (default `defaultFamily`). GSI keys get their index name in front. */
  readonly family?: (keyValue: string) => string;
  /** The clock windows are cut from (default Date.now); tests pass one they move themselves. */
  readonly now?: () => number;
}

export interface KeyStats {
  readonly table: string;
  /** The GSI, or null for the table's own partition key. */
  readonly index: string | null;
  /** `RUN#abc`, or `gsi1:PENDING#abc` for a GSI key. */
  readonly key: string;
  readonly family: string;
  /** Units consumed (charged after the request), since the start or `resetStats()`. */
  readonly wcu: number;
  readonly rcu: number;
  /** The most units this key consumed in one window. */
  readonly peakWcu: number;
  readonly peakRcu: number;
  /** Requests (or batch elements) refused because this key was at its limit. */
  readonly refused: number;
}

export interface FamilyStats {
  readonly family: string;
  /** How many keys of the family consumed or were refused. */
  readonly keys: number;
  readonly wcu: number;
  readonly rcu: number;
  readonly refused: number;
  /** The largest `peakWcu` / `peakRcu` of one of its keys. */
  readonly peakKeyWcu: number;
  readonly peakKeyRcu: number;
}

export interface ThrottleTotals {
  /** Metered requests received (PutItem, UpdateItem, DeleteItem, GetItem, Query, Batch…, Transact…). */
  requests: number;
  /** Requests answered with a throttling error (exception or cancelled transaction). */
  refused: number;
  /** Batch elements the proxy returned unprocessed. */
  unprocessed: number;
  wcu: number;
  rcu: number;
  /** Requests passed on without metering (other operations, or no key found). */
  unmetered: number;
  /** Requests the proxy made itself (DescribeTable, new images): not metered. */
  helperRequests: number;
}

export interface ThrottleStats {
  /** Keys that consumed or were refused, most refused first, then most consumed. */
  readonly keys: KeyStats[];
  readonly families: FamilyStats[];
  readonly totals: ThrottleTotals;
}

/**
 * A key value with its ids replaced, segment by segment (`#` apart): constant
 * labels (upper case: RUN, PENDING, RUNS) stay, a letter-and-number shard keeps
 * its letter, anything else is an id or a number: `RUN#abc#S3` → `RUN#*#S*`,
 * `RUN#abc#3` → `RUN#*#*`, `PENDING#run-1` → `PENDING#*`.
 */
export function defaultFamily(keyValue: string): string {
  return keyValue
    .split('#')
    .map((seg) => {
      if (/^[A-Z][A-Z_]*$/.test(seg)) return seg;
      const shard = /^([A-Z]{1,3})\d+$/.exec(seg); // a shard or stripe number keeps its letter
      return shard ? `${shard[1]}*` : '*';
    })
    .join('#');
}

/** An item's size as DynamoDB counts it for capacity (CapacityUnitCalculations.html); the item in wire form (the SDK's `Record<string, AttributeValue>`). */
export function itemSize(item: Readonly<Record<string, object>>): number {
  let n = 0;
  for (const [name, v] of Object.entries(item)) n += utf8(name) + valueSize(v as AttributeValue);
  return n;
}

function valueSize(v: AttributeValue): number {
  if ('S' in v) return utf8(String(v.S));
  if ('N' in v) return numberSize(String(v.N));
  if ('B' in v) return Buffer.from(String(v.B), 'base64').length;
  if ('BOOL' in v || 'NULL' in v) return 1;
  if ('SS' in v) return (v.SS as string[]).reduce((s, x) => s + utf8(x), 0);
  if ('NS' in v) return (v.NS as string[]).reduce((s, x) => s + numberSize(x), 0);
  if ('BS' in v) return (v.BS as string[]).reduce((s, x) => s + 1 + Buffer.from(x, 'base64').length, 0); // 1 more per member: as DynamoDB Local counts
  if ('L' in v) return 3 + (v.L as AttributeValue[]).reduce((s, x) => s + 1 + valueSize(x), 0);
  if ('M' in v) return 3 + Object.entries(v.M as WireItem).reduce((s, [k, x]) => s + 1 + utf8(k) + valueSize(x), 0);
  return 0;
}

/**
 * A number is stored as base-100 digits aligned on the decimal point, zero
 * pairs at either end dropped, plus a byte (and one more when negative): the
 * documented "1 byte per two significant digits + 1", made exact against
 * DynamoDB Local's ConsumedCapacity (1.5 → 3 bytes, -1 → 3, 0 → 1).
 */
function numberSize(n: string): number {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(n.trim());
  if (!m) return Math.ceil(n.length / 2) + 1;
  const digits = `${m[2] ?? ''}${m[3] ?? ''}`;
  const point = (m[2] ?? '').length + Number(m[4] ?? 0);
  let int = point >= digits.length ? digits.padEnd(point, '0') : digits.slice(0, Math.max(0, point));
  let frac = point >= digits.length ? '' : point < 0 ? `${'0'.repeat(-point)}${digits}` : digits.slice(point);
  int = int.replace(/^0+/, '');
  frac = frac.replace(/0+$/, '');
  if (int.length % 2) int = `0${int}`;
  if (frac.length % 2) frac = `${frac}0`;
  const pairs = `${int}${frac}`.match(/../g) ?? [];
  while (pairs[0] === '00') pairs.shift();
  while (pairs[pairs.length - 1] === '00') pairs.pop();
  return pairs.length + 1 + (m[1] === '-' && pairs.length ? 1 : 0);
}

const utf8 = (s: string) => Buffer.byteLength(s, 'utf8');

/** Write units: 1 per started KB, at least 1. */
const wcu = (bytes: number, times = 1) => Math.max(1, Math.ceil(bytes / 1024)) * times;
/** Read units: 1 per started 4 KB, at least 1; half when eventually consistent. */
const rcu = (bytes: number, consistent: boolean, times = 1) => Math.max(1, Math.ceil(bytes / 4096)) * (consistent ? 1 : 0.5) * times;

// ------------------------------------------------------------------ internals

type Json = Record<string, unknown>;
type Kind = 'write' | 'read';

interface IndexSchema {
  readonly name: string;
  readonly arn: string;
  readonly pk: string;
  readonly sk: string | null;
  readonly projection: string;
  /** Attributes an index entry carries besides the keys (INCLUDE), or null for ALL. */
  readonly include: readonly string[] | null;
}

interface Schema {
  readonly name: string;
  readonly arn: string;
  readonly provisioned: boolean;
  readonly pk: string;
  readonly sk: string | null;
  readonly indexes: readonly IndexSchema[];
}

interface Entry {
  readonly pk: string;
  readonly sk: string | null;
  readonly size: number;
  readonly digest: string;
}

/** What the proxy knows of an item: its size and, per index, its entry there (null: not in it). */
interface Shadow {
  readonly size: number;
  readonly entries: ReadonlyMap<string, Entry | null>;
}

/** Units a request consumes (or is estimated to) on one key. */
interface Touch {
  readonly table: string;
  readonly index: string | null;
  readonly value: string;
  readonly kind: Kind;
  readonly units: number;
}

interface Meter {
  readonly table: string;
  readonly index: string | null;
  readonly key: string;
  readonly family: string;
  window: number;
  used: Record<Kind, number>;
  reserved: Record<Kind, number>;
  total: Record<Kind, number>;
  peak: Record<Kind, number>;
  refused: number;
}

interface Call {
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  readonly method: string;
  readonly path: string;
  readonly op: string;
  readonly input: Json;
}

interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer | string;
}

interface Ticket {
  readonly window: number;
  readonly touches: readonly Touch[];
}

const NS = 'com.amazonaws.dynamodb.v20120810';
const ON_DEMAND_TABLE =
  'Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html';
const ON_DEMAND_INDEX =
  'Throughput exceeds the current capacity for one or more global secondary indexes. DynamoDB is automatically scaling your index so please try again shortly.';
const PROVISIONED_TABLE =
  'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.';
const PROVISIONED_INDEX =
  'The level of configured provisioned throughput for one or more global secondary indexes of the table was exceeded. Consider increasing your provisioning level for the under-provisioned global secondary indexes with the UpdateTable API';

export class ThrottleProxy {
  private server: Server | undefined;
  url = '';
  private readonly windowMs: number;
  private readonly limits: { table: Record<Kind, number>; index: Record<Kind, number> };
  private readonly family: (keyValue: string) => string;
  private readonly now: () => number;
  private readonly meters = new Map<string, Meter>();
  private readonly schemas = new Map<string, Promise<Schema | null>>();
  /** The same, once known (the error replies need a table's ARN and billing mode without waiting). */
  private readonly resolved = new Map<string, Schema>();
  /** Per table, per item (its primary key), what the proxy knows of it. */
  private readonly shadows = new Map<string, Map<string, Shadow>>();
  /** Per key (meter id), how many shadowed items (index entries) are under it and their bytes: a Query's unseen items are sized from it. */
  private readonly partitions = new Map<string, { items: number; bytes: number }>();
  private totals: ThrottleTotals = emptyTotals();

  constructor(
    private readonly upstream: URL,
    limits: ThrottleLimits,
    options: ThrottleOptions = {},
  ) {
    this.windowMs = limits.windowMs ?? 1_000;
    this.limits = {
      table: { write: limits.partitionWcu, read: limits.partitionRcu },
      index: { write: limits.gsiWcu ?? limits.partitionWcu, read: limits.gsiRcu ?? limits.partitionRcu },
    };
    for (const v of [this.windowMs, ...Object.values(this.limits.table), ...Object.values(this.limits.index)]) {
      if (!(v > 0)) throw new Error(`ThrottleProxy: limits and windowMs must be positive (got ${v})`);
    }
    this.family = options.family ?? defaultFamily;
    this.now = options.now ?? Date.now;
  }

  async start(): Promise<this> {
    this.server = createServer(
      withBody((req, res, body) => {
        let input: Json = {};
        try {
          input = body.length ? (JSON.parse(body.toString('utf8')) as Json) : {};
        } catch {
          // Not JSON: DynamoDB Local answers it.
        }
        const op = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? '';
        const call: Call = { headers: req.headers, body, method: req.method ?? 'POST', path: req.url ?? '/', op, input };
        void this.handle(call)
          .then((r) => res.writeHead(r.status, r.headers as Record<string, string>).end(r.body))
          .catch((err: unknown) => res.writeHead(502).end(String(err)));
      }),
    );
    this.url = await listenOnLoopback(this.server);
    return this;
  }

  async stop(): Promise<void> {
    await closeNow(this.server);
  }

  stats(): ThrottleStats {
    const keys: KeyStats[] = [...this.meters.values()]
      .filter((m) => m.total.write || m.total.read || m.refused)
      .map((m) => ({
        table: m.table,
        index: m.index,
        key: m.key,
        family: m.family,
        wcu: m.total.write,
        rcu: m.total.read,
        peakWcu: m.peak.write,
        peakRcu: m.peak.read,
        refused: m.refused,
      }))
      .sort((a, b) => b.refused - a.refused || b.wcu + b.rcu - (a.wcu + a.rcu) || a.key.localeCompare(b.key));
    const byFamily = new Map<string, { family: string; keys: number; wcu: number; rcu: number; refused: number; peakKeyWcu: number; peakKeyRcu: number }>();
    for (const k of keys) {
      const f = byFamily.get(k.family) ?? { family: k.family, keys: 0, wcu: 0, rcu: 0, refused: 0, peakKeyWcu: 0, peakKeyRcu: 0 };
      f.keys++;
      f.wcu += k.wcu;
      f.rcu += k.rcu;
      f.refused += k.refused;
      f.peakKeyWcu = Math.max(f.peakKeyWcu, k.peakWcu);
      f.peakKeyRcu = Math.max(f.peakKeyRcu, k.peakRcu);
      byFamily.set(k.family, f);
    }
    const families = [...byFamily.values()].sort((a, b) => b.refused - a.refused || b.wcu + b.rcu - (a.wcu + a.rcu) || a.family.localeCompare(b.family));
    return { keys, families, totals: { ...this.totals } };
  }

  /** Starts the counters over; the current windows' consumption and the shadow stay (throttling goes on as before). */
  resetStats(): void {
    for (const m of this.meters.values()) {
      m.total = { write: 0, read: 0 };
      m.peak = { write: 0, read: 0 };
      m.refused = 0;
    }
    this.totals = emptyTotals();
  }

  // ------------------------------------------------------------ dispatch

  private async handle(call: Call): Promise<Reply> {
    switch (call.op) {
      case 'PutItem':
      case 'UpdateItem':
      case 'DeleteItem':
        return this.meteredOr(call, () => this.writeItem(call));
      case 'GetItem':
        return this.meteredOr(call, () => this.getItem(call));
      case 'Query':
        return this.meteredOr(call, () => this.query(call));
      case 'BatchWriteItem':
        return this.meteredOr(call, () => this.batchWrite(call));
      case 'BatchGetItem':
        return this.meteredOr(call, () => this.batchGet(call));
      case 'TransactWriteItems':
        return this.meteredOr(call, () => this.transactWrite(call));
      case 'TransactGetItems':
        return this.meteredOr(call, () => this.transactGet(call));
      case 'CreateTable':
      case 'DeleteTable':
      case 'UpdateTable':
        // Whatever the proxy knew of the table may no longer hold.
        this.forget(tableName(call.input.TableName));
        break;
    }
    this.totals.unmetered++;
    return toReply(await this.send(call));
  }

  /** `run` answers a request it can meter, or null when it cannot (no table, no key): then it goes through unmetered. */
  private async meteredOr(call: Call, run: () => Promise<Reply | null>): Promise<Reply> {
    const reply = await run();
    if (reply) {
      this.totals.requests++;
      return reply;
    }
    this.totals.unmetered++;
    return toReply(await this.send(call));
  }

  // ------------------------------------------------------------ single-item writes

  private async writeItem(call: Call): Promise<Reply | null> {
    const { op, input } = call;
    const s = await this.schema(call, input.TableName);
    if (!s) return null;
    const item = op === 'PutItem' ? (input.Item as WireItem | undefined) : undefined;
    const key = keyOf(s, (item ?? input.Key) as WireItem | undefined);
    if (!key) return null;
    const before = this.shadowOf(s, key);
    const next = op === 'PutItem' ? describe(s, item!) : op === 'DeleteItem' ? null : predictUpdate(s, before, input);
    const estimate = [
      baseTouch(s, key, 'write', wcu(Math.max(before?.size ?? 0, next?.size ?? 0))),
      ...indexWrites(s, before, next, op === 'UpdateItem' ? changedAttributes(input) : 'all'),
    ];
    const hot = this.hot(estimate);
    if (hot.length) return this.refuse(hot, this.throttled(hot));
    const ticket = this.reserve(estimate);
    const res = await this.admitted(ticket, () => this.send(call));
    const out = parseBody(res);
    let actual: Touch[] = [];
    if (res.status === 200) {
      // ALL_OLD answers exactly what was there (nothing, when it carries no Attributes) — better than the shadow.
      const old = input.ReturnValues !== 'ALL_OLD' ? before : out.Attributes ? describe(s, out.Attributes as WireItem) : null;
      let after: Shadow | null = null;
      if (op === 'PutItem') after = describe(s, item!);
      else if (op === 'UpdateItem')
        after =
          input.ReturnValues === 'ALL_NEW' && out.Attributes
            ? describe(s, out.Attributes as WireItem)
            : (await this.images(call, [{ s, key, fallback: next }]))[0]!;
      actual = [baseTouch(s, key, 'write', wcu(Math.max(old?.size ?? 0, after?.size ?? 0))), ...indexWrites(s, old, after, 'all')];
      this.remember(s, key, after);
    } else if (errorName(out) === 'ConditionalCheckFailedException') {
      // A failed condition still costs the existing item's size (1 if there is none); nothing changes in the indexes.
      const seen = out.Item ? this.learn(s, out.Item as WireItem) : before;
      actual = [baseTouch(s, key, 'write', wcu(seen?.size ?? 0))];
    }
    this.settle(ticket, actual);
    return toReply(res);
  }

  // ------------------------------------------------------------ single-item and query reads

  private async getItem(call: Call): Promise<Reply | null> {
    const { input } = call;
    const s = await this.schema(call, input.TableName);
    const key = s && keyOf(s, input.Key as WireItem | undefined);
    if (!s || !key) return null;
    const consistent = input.ConsistentRead === true;
    const estimate = [baseTouch(s, key, 'read', rcu(this.shadowOf(s, key)?.size ?? 0, consistent))];
    const hot = this.hot(estimate);
    if (hot.length) return this.refuse(hot, this.throttled(hot));
    const ticket = this.reserve(estimate);
    const res = await this.admitted(ticket, () => this.send(call));
    let actual: Touch[] = [];
    if (res.status === 200) {
      const out = parseBody(res);
      const size = out.Item ? this.readSize(s, out.Item as WireItem, whole(input)) : 0;
      actual = [baseTouch(s, key, 'read', rcu(size, consistent))];
    }
    this.settle(ticket, actual);
    return toReply(res);
  }

  private async query(call: Call): Promise<Reply | null> {
    const { input } = call;
    const s = await this.schema(call, input.TableName);
    if (!s) return null;
    const index = input.IndexName === undefined ? null : s.indexes.find((i) => i.name === input.IndexName);
    if (index === undefined) return null;
    const value = partitionValueOf(input, index ? index.pk : s.pk);
    if (value === undefined) return null;
    const consistent = !index && input.ConsistentRead === true;
    const touch = (units: number): Touch => ({ table: s.name, index: index?.name ?? null, value, kind: 'read', units });
    const estimate = [touch(rcu(0, consistent))];
    const hot = this.hot(estimate);
    if (hot.length) return this.refuse(hot, this.throttled(hot));
    const ticket = this.reserve(estimate);
    const res = await this.admitted(ticket, () => this.send(call));
    let actual: Touch[] = [];
    if (res.status === 200) {
      const out = parseBody(res);
      const items = (out.Items as WireItem[] | undefined) ?? [];
      const full = whole(input) && (!index || index.projection === 'ALL');
      let known = 0;
      let bytes = 0;
      for (const item of items) {
        const key = keyOf(s, item);
        if (whole(input)) {
          // The item as returned is the whole item (or the whole index entry).
          bytes += itemSize(item);
          known++;
          if (full && key) this.learn(s, item);
          continue;
        }
        const seen = key ? this.shadowOf(s, key) : null;
        if (seen) {
          bytes += index ? (seen.entries.get(index.name)?.size ?? itemSize(item)) : seen.size;
          known++;
        }
      }
      // Items read but not returned (a filter dropped them) or not recognisable (a projection cut their keys): at the key's mean size.
      const unseen = Math.max(0, Number(out.ScannedCount ?? items.length) - known);
      if (unseen) {
        const p = this.partitions.get(meterId(s.name, index?.name ?? null, value));
        const mean = p && p.items ? p.bytes / p.items : known ? bytes / known : 0;
        bytes += unseen * mean;
      }
      actual = [touch(rcu(bytes, consistent))];
    }
    this.settle(ticket, actual);
    return toReply(res);
  }

  // ------------------------------------------------------------ batches

  private async batchWrite(call: Call): Promise<Reply | null> {
    const requests = call.input.RequestItems as Record<string, Json[]> | undefined;
    if (!requests) return null;
    const elements: { table: string; request: Json; s: Schema; key: WireItem; before: Shadow | null; after: Shadow | null; estimate: Touch[] }[] = [];
    for (const [table, list] of Object.entries(requests)) {
      const s = await this.schema(call, table);
      if (!s) return null;
      for (const request of list) {
        const put = (request.PutRequest as Json | undefined)?.Item as WireItem | undefined;
        const key = keyOf(s, put ?? ((request.DeleteRequest as Json | undefined)?.Key as WireItem | undefined));
        if (!key) return null;
        const before = this.shadowOf(s, key);
        const after = put ? describe(s, put) : null;
        const estimate = [baseTouch(s, key, 'write', wcu(Math.max(before?.size ?? 0, after?.size ?? 0))), ...indexWrites(s, before, after, 'all')];
        elements.push({ table, request, s, key, before, after, estimate });
      }
    }
    const hotOf = elements.map((e) => this.hot(e.estimate));
    const refused = elements.filter((_, i) => hotOf[i]!.length);
    if (refused.length && refused.length === elements.length) return this.refuse(hotOf.flat(), this.throttled(hotOf.flat()));
    for (const h of hotOf) if (h.length) this.refuseKeys(h);
    this.totals.unprocessed += refused.length;
    const passing = elements.filter((_, i) => !hotOf[i]!.length);
    const ticket = this.reserve(passing.flatMap((e) => e.estimate));
    const forwarded: Record<string, Json[]> = {};
    for (const e of passing) (forwarded[e.table] ??= []).push(e.request);
    const res = await this.admitted(ticket, () => this.send(call, refused.length ? { ...call.input, RequestItems: forwarded } : undefined));
    const out = parseBody(res);
    const actual: Touch[] = [];
    if (res.status === 200) {
      const left = (out.UnprocessedItems as Record<string, Json[]> | undefined) ?? {};
      const leftIds = new Set(Object.entries(left).flatMap(([table, list]) => list.map((r) => elementId(table, r))));
      for (const e of passing) {
        if (leftIds.has(elementId(e.table, e.request))) continue;
        actual.push(baseTouch(e.s, e.key, 'write', wcu(Math.max(e.before?.size ?? 0, e.after?.size ?? 0))), ...indexWrites(e.s, e.before, e.after, 'all'));
        this.remember(e.s, e.key, e.after);
      }
      if (refused.length) {
        for (const e of refused) (left[e.table] ??= []).push(e.request);
        out.UnprocessedItems = left;
      }
    }
    this.settle(ticket, actual);
    return res.status === 200 && refused.length ? rewritten(res, out) : toReply(res);
  }

  private async batchGet(call: Call): Promise<Reply | null> {
    const requests = call.input.RequestItems as Record<string, Json> | undefined;
    if (!requests) return null;
    const elements: { table: string; s: Schema; key: WireItem; consistent: boolean; estimate: Touch[] }[] = [];
    for (const [table, ka] of Object.entries(requests)) {
      const s = await this.schema(call, table);
      if (!s) return null;
      for (const k of (ka.Keys as WireItem[] | undefined) ?? []) {
        const key = keyOf(s, k);
        if (!key) return null;
        const consistent = ka.ConsistentRead === true;
        elements.push({ table, s, key, consistent, estimate: [baseTouch(s, key, 'read', rcu(this.shadowOf(s, key)?.size ?? 0, consistent))] });
      }
    }
    const hotOf = elements.map((e) => this.hot(e.estimate));
    const refused = elements.filter((_, i) => hotOf[i]!.length);
    if (refused.length && refused.length === elements.length) return this.refuse(hotOf.flat(), this.throttled(hotOf.flat()));
    for (const h of hotOf) if (h.length) this.refuseKeys(h);
    this.totals.unprocessed += refused.length;
    const passing = elements.filter((_, i) => !hotOf[i]!.length);
    const ticket = this.reserve(passing.flatMap((e) => e.estimate));
    const forwarded: Record<string, Json> = {};
    for (const e of passing) {
      const ka = (forwarded[e.table] ??= { ...requests[e.table], Keys: [] });
      (ka.Keys as WireItem[]).push(e.key);
    }
    const res = await this.admitted(ticket, () => this.send(call, refused.length ? { ...call.input, RequestItems: forwarded } : undefined));
    const out = parseBody(res);
    const actual: Touch[] = [];
    if (res.status === 200) {
      const found = new Map<string, WireItem>();
      for (const [table, items] of Object.entries((out.Responses as Record<string, WireItem[]> | undefined) ?? {})) {
        const s = passing.find((e) => e.table === table)?.s;
        for (const item of s ? items : []) {
          const key = keyOf(s!, item);
          if (key) found.set(`${table}\u0000${itemId(s!, key)}`, item);
        }
      }
      const left = (out.UnprocessedKeys as Record<string, Json> | undefined) ?? {};
      const leftIds = new Set(
        Object.entries(left).flatMap(([table, ka]) => ((ka.Keys as WireItem[] | undefined) ?? []).map((k) => `${table}\u0000${canonical(k)}`)),
      );
      for (const e of passing) {
        if (leftIds.has(`${e.table}\u0000${canonical(e.key)}`)) continue;
        const item = found.get(`${e.table}\u0000${itemId(e.s, e.key)}`);
        const size = item ? this.readSize(e.s, item, whole(requests[e.table] ?? {})) : 0;
        actual.push(baseTouch(e.s, e.key, 'read', rcu(size, e.consistent)));
      }
      if (refused.length) {
        for (const e of refused) {
          const ka = (left[e.table] ??= { ...requests[e.table], Keys: [] });
          (ka.Keys as WireItem[]).push(e.key);
        }
        out.UnprocessedKeys = left;
      }
    }
    this.settle(ticket, actual);
    return res.status === 200 && refused.length ? rewritten(res, out) : toReply(res);
  }

  // ------------------------------------------------------------ transactions

  private async transactWrite(call: Call): Promise<Reply | null> {
    const actions = call.input.TransactItems as Record<string, Json>[] | undefined;
    if (!actions?.length) return null;
    const plan: { s: Schema; key: WireItem; before: Shadow | null; kind: string; predicted: Shadow | null; estimate: Touch[] }[] = [];
    for (const action of actions) {
      const [kind, body] = Object.entries(action)[0] ?? [];
      if (!kind || !body || typeof body !== 'object') return null;
      const b = body;
      const s = await this.schema(call, b.TableName);
      const key = s && keyOf(s, (b.Item ?? b.Key) as WireItem | undefined);
      if (!s || !key) return null;
      const before = this.shadowOf(s, key);
      const predicted = kind === 'Put' ? describe(s, b.Item as WireItem) : kind === 'Update' ? predictUpdate(s, before, b) : kind === 'Delete' ? null : before;
      const changed = kind === 'Update' ? changedAttributes(b) : kind === 'ConditionCheck' ? new Set<string>() : 'all';
      const estimate = [baseTouch(s, key, 'write', txUnits(kind, before, predicted)), ...indexWrites(s, before, predicted, changed, 2)];
      plan.push({ s, key, before, kind, predicted, estimate });
    }
    const hotOf = plan.map((p) => this.hot(p.estimate));
    if (hotOf.some((h) => h.length)) return this.refuse(hotOf.flat(), this.cancelled(hotOf));
    const ticket = this.reserve(plan.flatMap((p) => p.estimate));
    const res = await this.admitted(ticket, () => this.send(call));
    const out = parseBody(res);
    const actual: Touch[] = [];
    if (res.status === 200) {
      const updated = plan.filter((p) => p.kind === 'Update');
      const images = await this.images(
        call,
        updated.map((p) => ({ s: p.s, key: p.key, fallback: p.predicted })),
      );
      const after = new Map(updated.map((p, i) => [p, images[i]!] as const));
      for (const p of plan) {
        const next = p.kind === 'Put' ? p.predicted : p.kind === 'Update' ? after.get(p)! : p.kind === 'Delete' ? null : p.before;
        actual.push(baseTouch(p.s, p.key, 'write', txUnits(p.kind, p.before, next)), ...indexWrites(p.s, p.before, next, 'all', 2));
        if (p.kind !== 'ConditionCheck') this.remember(p.s, p.key, next);
      }
    } else if (errorName(out) === 'TransactionCanceledException') {
      // Cancelled by DynamoDB Local (a failed condition): charged as the prepare phase, once per action (an assumption).
      const reasons = (out.CancellationReasons as Json[] | undefined) ?? [];
      plan.forEach((p, i) => {
        const seen = reasons[i]?.Item ? this.learn(p.s, reasons[i].Item as WireItem) : p.before;
        actual.push(baseTouch(p.s, p.key, 'write', wcu(seen?.size ?? 0)));
      });
    }
    this.settle(ticket, actual);
    return toReply(res);
  }

  private async transactGet(call: Call): Promise<Reply | null> {
    const actions = call.input.TransactItems as Record<string, Json>[] | undefined;
    if (!actions?.length) return null;
    const plan: { s: Schema; key: WireItem; body: Json; estimate: Touch[] }[] = [];
    for (const action of actions) {
      const body = action.Get;
      const s = body && (await this.schema(call, body.TableName));
      const key = s && keyOf(s, body.Key as WireItem | undefined);
      if (!body || !s || !key) return null;
      plan.push({ s, key, body, estimate: [baseTouch(s, key, 'read', rcu(this.shadowOf(s, key)?.size ?? 0, true, 2))] });
    }
    const hotOf = plan.map((p) => this.hot(p.estimate));
    if (hotOf.some((h) => h.length)) return this.refuse(hotOf.flat(), this.cancelled(hotOf));
    const ticket = this.reserve(plan.flatMap((p) => p.estimate));
    const res = await this.admitted(ticket, () => this.send(call));
    const actual: Touch[] = [];
    if (res.status === 200) {
      const responses = (parseBody(res).Responses as Json[] | undefined) ?? [];
      plan.forEach((p, i) => {
        const item = responses[i]?.Item as WireItem | undefined;
        actual.push(baseTouch(p.s, p.key, 'read', rcu(item ? this.readSize(p.s, item, whole(p.body)) : 0, true, 2)));
      });
    }
    this.settle(ticket, actual);
    return toReply(res);
  }

  // ------------------------------------------------------------ metering

  private window(): number {
    return Math.floor(this.now() / this.windowMs);
  }

  private meter(t: Touch): Meter {
    const id = meterId(t.table, t.index, t.value);
    const w = this.window();
    let m = this.meters.get(id);
    if (!m) {
      const family = this.family(t.value);
      m = {
        table: t.table,
        index: t.index,
        key: t.index ? `${t.index}:${t.value}` : t.value,
        family: t.index ? `${t.index}:${family}` : family,
        window: w,
        used: { write: 0, read: 0 },
        reserved: { write: 0, read: 0 },
        total: { write: 0, read: 0 },
        peak: { write: 0, read: 0 },
        refused: 0,
      };
      this.meters.set(id, m);
    }
    if (m.window !== w) {
      m.window = w;
      m.used = { write: 0, read: 0 };
      m.reserved = { write: 0, read: 0 };
    }
    return m;
  }

  /** The touches whose key has already consumed (or reserved) its limit in this window. */
  private hot(touches: readonly Touch[]): Touch[] {
    return touches.filter((t) => {
      const m = this.meter(t);
      return m.used[t.kind] + m.reserved[t.kind] >= this.limits[t.index ? 'index' : 'table'][t.kind];
    });
  }

  private reserve(touches: readonly Touch[]): Ticket {
    for (const t of touches) this.meter(t).reserved[t.kind] += t.units;
    return { window: this.window(), touches };
  }

  /** The estimate gives way to what the request consumed: in the window it was admitted in while that lasts, else in the current one. */
  private settle(ticket: Ticket, actual: readonly Touch[]): void {
    for (const t of ticket.touches) {
      const m = this.meter(t);
      if (m.window === ticket.window) m.reserved[t.kind] = Math.max(0, m.reserved[t.kind] - t.units);
    }
    for (const t of actual) {
      const m = this.meter(t);
      m.used[t.kind] += t.units;
      m.total[t.kind] += t.units;
      m.peak[t.kind] = Math.max(m.peak[t.kind], m.used[t.kind]);
      this.totals[t.kind === 'write' ? 'wcu' : 'rcu'] += t.units;
    }
  }

  /** Forwards an admitted request; should DynamoDB Local not answer, its reservation goes (the caller gets a 502 and retries). */
  private async admitted(ticket: Ticket, forward: () => Promise<Forwarded>): Promise<Forwarded> {
    try {
      return await forward();
    } catch (err) {
      this.settle(ticket, []);
      throw err;
    }
  }

  private refuseKeys(hot: readonly Touch[]): void {
    for (const m of new Set(hot.map((t) => this.meter(t)))) m.refused++;
  }

  private refuse(hot: readonly Touch[], reply: Reply): Reply {
    this.refuseKeys(hot);
    this.totals.refused++;
    return reply;
  }

  // ------------------------------------------------------------ DynamoDB's answers

  private throttled(hot: readonly Touch[]): Reply {
    const first = hot[0]!;
    const provisioned = this.knownSchema(first.table)?.provisioned ?? false;
    const onTable = hot.some((t) => !t.index);
    const seen = new Set<string>();
    const reasons: { reason: string; resource: string }[] = [];
    for (const t of hot) {
      const reason = `${t.index ? 'Index' : 'Table'}${t.kind === 'write' ? 'Write' : 'Read'}KeyRangeThroughputExceeded`;
      const resource = this.arnOf(t);
      if (seen.has(reason + resource)) continue;
      seen.add(reason + resource);
      reasons.push({ reason, resource });
    }
    return provisioned
      ? jsonReply(400, {
          __type: `${NS}#ProvisionedThroughputExceededException`,
          message: onTable ? PROVISIONED_TABLE : PROVISIONED_INDEX,
          ThrottlingReasons: reasons,
        })
      : jsonReply(400, { __type: `${NS}#ThrottlingException`, message: onTable ? ON_DEMAND_TABLE : ON_DEMAND_INDEX, throttlingReasons: reasons });
  }

  private cancelled(hotOf: readonly (readonly Touch[])[]): Reply {
    const reasons = hotOf.map((hot) => {
      if (!hot.length) return { Code: 'None' };
      const provisioned = this.knownSchema(hot[0]!.table)?.provisioned ?? false;
      const onTable = hot.some((t) => !t.index);
      return provisioned
        ? { Code: 'ProvisionedThroughputExceeded', Message: onTable ? PROVISIONED_TABLE : PROVISIONED_INDEX }
        : { Code: 'ThrottlingError', Message: onTable ? ON_DEMAND_TABLE : ON_DEMAND_INDEX };
    });
    return jsonReply(400, {
      __type: `${NS}#TransactionCanceledException`,
      Message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(', ')}]`,
      CancellationReasons: reasons,
    });
  }

  private arnOf(t: Touch): string {
    const s = this.knownSchema(t.table);
    if (!s) return t.table;
    return t.index ? (s.indexes.find((i) => i.name === t.index)?.arn ?? `${s.arn}/index/${t.index}`) : s.arn;
  }

  // ------------------------------------------------------------ tables and the shadow

  private knownSchema(table: string): Schema | null {
    return this.resolved.get(table) ?? null;
  }

  /** The table's keys, indexes and billing mode, asked of DynamoDB Local once (DescribeTable, not metered). */
  private schema(call: Call, name: unknown): Promise<Schema | null> {
    const table = tableName(name);
    if (!table) return Promise.resolve(null);
    let s = this.schemas.get(table);
    if (!s) {
      s = this.helper(call, 'DescribeTable', { TableName: table }).then((out) => {
        const schema = out ? schemaOf(out.Table as Json | undefined) : null;
        if (schema) this.resolved.set(table, schema);
        else this.schemas.delete(table); // not there (yet): ask again next time
        return schema;
      });
      this.schemas.set(table, s);
    }
    return s;
  }

  private forget(table: string): void {
    this.schemas.delete(table);
    this.resolved.delete(table);
    this.shadows.delete(table);
    for (const id of this.partitions.keys()) if (id.startsWith(`${table}\u0000`)) this.partitions.delete(id);
  }

  private shadowOf(s: Schema, key: WireItem): Shadow | null {
    return this.shadows.get(s.name)?.get(itemId(s, key)) ?? null;
  }

  /** A write's outcome: the item as it now is (null: gone). */
  private remember(s: Schema, key: WireItem, next: Shadow | null): void {
    let items = this.shadows.get(s.name);
    if (!items) this.shadows.set(s.name, (items = new Map<string, Shadow>()));
    const id = itemId(s, key);
    const pk = avString(key[s.pk]!);
    const prev = items.get(id);
    if (prev) this.count(s, pk, prev, -1);
    if (next) {
      items.set(id, next);
      this.count(s, pk, next, 1);
    } else {
      items.delete(id);
    }
  }

  /** An item a read returned whole: remembered unless the shadow already knows it (a read may answer before a concurrent write is remembered). */
  private learn(s: Schema, item: WireItem): Shadow {
    const key = keyOf(s, item)!;
    const known = this.shadowOf(s, key);
    if (known) return known;
    const seen = describe(s, item);
    this.remember(s, key, seen);
    return seen;
  }

  private count(s: Schema, pk: string, sh: Shadow, sign: 1 | -1): void {
    const add = (id: string, bytes: number) => {
      const p = this.partitions.get(id) ?? { items: 0, bytes: 0 };
      p.items += sign;
      p.bytes += sign * bytes;
      if (p.items <= 0) this.partitions.delete(id);
      else this.partitions.set(id, p);
    };
    add(meterId(s.name, null, pk), sh.size);
    for (const [index, e] of sh.entries) if (e) add(meterId(s.name, index, e.pk), e.size);
  }

  /** The size a read of `item` is charged for: the whole item's, known from the shadow when a projection cut it. */
  private readSize(s: Schema, item: WireItem, isWhole: boolean): number {
    if (isWhole) {
      this.learn(s, item);
      return itemSize(item); // what is there now, even should the shadow be behind
    }
    const key = keyOf(s, item);
    return (key && this.shadowOf(s, key)?.size) ?? itemSize(item);
  }

  /**
   * The items as they now are (consistent reads, not metered); null for an
   * item that is not there. Should DynamoDB Local refuse the read, the
   * fallback stands in: the write went through and its answer must reach the
   * caller whatever the bookkeeping knows.
   */
  private async images(call: Call, wanted: readonly { s: Schema; key: WireItem; fallback: Shadow | null }[]): Promise<(Shadow | null)[]> {
    const found = new Map<string, WireItem>();
    let pending = wanted.map((w) => ({ table: w.s.name, key: w.key }));
    while (pending.length) {
      const chunk = pending.slice(0, 100);
      pending = pending.slice(100);
      const requestItems: Record<string, Json> = {};
      for (const p of chunk) ((requestItems[p.table] ??= { Keys: [], ConsistentRead: true }).Keys as WireItem[]).push(p.key);
      const out = await this.helper(call, 'BatchGetItem', { RequestItems: requestItems });
      if (!out) return wanted.map((w) => w.fallback);
      for (const [table, items] of Object.entries((out.Responses as Record<string, WireItem[]> | undefined) ?? {})) {
        const s = wanted.find((w) => w.s.name === table)?.s;
        for (const item of s ? items : []) {
          const key = keyOf(s!, item);
          if (key) found.set(`${table}\u0000${itemId(s!, key)}`, item);
        }
      }
      for (const [table, ka] of Object.entries((out.UnprocessedKeys as Record<string, Json> | undefined) ?? {})) {
        for (const key of (ka.Keys as WireItem[] | undefined) ?? []) pending.push({ table, key });
      }
    }
    return wanted.map((w) => {
      const item = found.get(`${w.s.name}\u0000${itemId(w.s, w.key)}`);
      return item ? describe(w.s, item) : null;
    });
  }

  // ------------------------------------------------------------ HTTP

  /**
   * The request as it came, or (a batch with elements held back) the same
   * request with another body: its signature no longer matches, which
   * DynamoDB Local does not check.
   */
  private send(call: Call, input?: Json): Promise<Forwarded> {
    if (!input) return forwardHttp(this.upstream, call.headers, call.body, call.method, call.path);
    const body = Buffer.from(JSON.stringify(input));
    const headers: IncomingHttpHeaders = { ...call.headers, 'content-length': String(body.length) };
    delete headers['transfer-encoding'];
    return forwardHttp(this.upstream, headers, body, call.method, call.path);
  }

  /** A request of the proxy's own, with the caller's credentials (DynamoDB Local keeps a database per access key unless -sharedDb). */
  private async helper(call: Call, op: string, input: Json): Promise<Json | null> {
    this.totals.helperRequests++;
    const body = Buffer.from(JSON.stringify(input));
    const headers: IncomingHttpHeaders = {
      'content-type': 'application/x-amz-json-1.0',
      'x-amz-target': `DynamoDB_20120810.${op}`,
      'content-length': String(body.length),
    };
    for (const h of ['authorization', 'x-amz-date', 'x-amz-security-token']) if (call.headers[h]) headers[h] = call.headers[h];
    const res = await forwardHttp(this.upstream, headers, body, 'POST', '/');
    return res.status === 200 ? parseBody(res) : null;
  }
}

// ------------------------------------------------------------------ helpers

function emptyTotals(): ThrottleTotals {
  return { requests: 0, refused: 0, unprocessed: 0, wcu: 0, rcu: 0, unmetered: 0, helperRequests: 0 };
}

function meterId(table: string, index: string | null, value: string): string {
  return `${table}\u0000${index ?? ''}\u0000${value}`;
}

/** A table named by name or ARN. */
function tableName(name: unknown): string {
  const n = typeof name === 'string' ? name : '';
  const arn = /^arn:[^:]+:dynamodb:[^:]*:[^:]*:table\/([^/]+)/.exec(n);
  return arn ? arn[1]! : n;
}

function schemaOf(t: Json | undefined): Schema | null {
  if (!t) return null;
  const hashOf = (ks: unknown) => (ks as { AttributeName: string; KeyType: string }[] | undefined)?.find((k) => k.KeyType === 'HASH')?.AttributeName;
  const rangeOf = (ks: unknown) => (ks as { AttributeName: string; KeyType: string }[] | undefined)?.find((k) => k.KeyType === 'RANGE')?.AttributeName ?? null;
  const pk = hashOf(t.KeySchema);
  if (!pk) return null;
  const name = String(t.TableName);
  const arn = typeof t.TableArn === 'string' ? t.TableArn : `arn:aws:dynamodb:local:000000000000:table/${name}`;
  const indexes = ((t.GlobalSecondaryIndexes as Json[] | undefined) ?? []).flatMap((g): IndexSchema[] => {
    const ipk = hashOf(g.KeySchema);
    if (!ipk) return [];
    const type = (g.Projection as Json | undefined)?.ProjectionType;
    const projection = typeof type === 'string' ? type : 'ALL';
    const include = projection === 'ALL' ? null : projection === 'INCLUDE' ? (((g.Projection as Json).NonKeyAttributes as string[] | undefined) ?? []) : [];
    const iname = String(g.IndexName);
    return [
      { name: iname, arn: typeof g.IndexArn === 'string' ? g.IndexArn : `${arn}/index/${iname}`, pk: ipk, sk: rangeOf(g.KeySchema), projection, include },
    ];
  });
  // A table without a billing summary is provisioned (the mode DynamoDB started with).
  const provisioned = ((t.BillingModeSummary as Json | undefined)?.BillingMode ?? 'PROVISIONED') === 'PROVISIONED';
  return { name, arn, provisioned, pk, sk: rangeOf(t.KeySchema), indexes };
}

/** A key attribute's value as text (the key names the stats use). */
function avString(v: AttributeValue): string {
  if ('S' in v) return String(v.S);
  if ('N' in v) return String(v.N);
  if ('B' in v) return String(v.B);
  return canonical(v);
}

/** The primary key of an item (or a key), or null when it lacks one. */
function keyOf(s: Schema, item: WireItem | undefined): WireItem | null {
  if (!item || typeof item !== 'object') return null;
  const pk = item[s.pk];
  const sk = s.sk ? item[s.sk] : undefined;
  if (!pk || (s.sk && !sk)) return null;
  return s.sk ? { [s.pk]: pk, [s.sk]: sk! } : { [s.pk]: pk };
}

function itemId(s: Schema, key: WireItem): string {
  return canonical(keyOf(s, key) ?? key);
}

function elementId(table: string, request: Json): string {
  return `${table}\u0000${canonical(request)}`;
}

/** JSON with sorted member names: equal values, equal text. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Json)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/** A TransactWriteItems action's units on its table: twice a plain write's; a ConditionCheck 2 whatever the item's size (as DynamoDB Local counts it). */
function txUnits(kind: string, before: Shadow | null, after: Shadow | null): number {
  return kind === 'ConditionCheck' ? 2 : wcu(Math.max(before?.size ?? 0, after?.size ?? 0), 2);
}

function baseTouch(s: Schema, key: WireItem, kind: Kind, units: number): Touch {
  return { table: s.name, index: null, value: avString(key[s.pk]!), kind, units };
}

function entryOf(s: Schema, index: IndexSchema, item: WireItem): Entry | null {
  const pk = item[index.pk];
  const sk = index.sk ? item[index.sk] : undefined;
  if (!pk || (index.sk && !sk)) return null; // sparse: not in the index
  let projected: WireItem = item;
  if (index.include) {
    projected = {};
    for (const a of [s.pk, s.sk, index.pk, index.sk, ...index.include]) if (a && item[a]) projected[a] = item[a];
  }
  return {
    pk: avString(pk),
    sk: sk ? avString(sk) : null,
    size: itemSize(projected),
    digest: createHash('sha1').update(canonical(projected)).digest('base64'),
  };
}

function describe(s: Schema, item: WireItem): Shadow {
  return { size: itemSize(item), entries: new Map(s.indexes.map((i) => [i.name, entryOf(s, i, item)])) };
}

/**
 * The index writes of a change from `before` to `after` (GSI.html#GSI.Writes):
 * in → put, out → delete, key moved → delete + put, projected attributes
 * changed → one write, nothing changed there → none. `changed` (an
 * UpdateItem's estimate) lets an index that projects none of the changed
 * attributes go untouched.
 */
function indexWrites(s: Schema, before: Shadow | null, after: Shadow | null, changed: ReadonlySet<string> | 'all', times = 1): Touch[] {
  const out: Touch[] = [];
  for (const index of s.indexes) {
    const o = before?.entries.get(index.name) ?? null;
    const n = after?.entries.get(index.name) ?? null;
    const touch = (e: Entry, bytes: number): Touch => ({ table: s.name, index: index.name, value: e.pk, kind: 'write', units: wcu(bytes, times) });
    if (o && n && o.pk === n.pk && o.sk === n.sk) {
      if (changed !== 'all' && index.include && ![...changed].some((a) => index.include!.includes(a))) continue;
      if (o.digest !== n.digest) out.push(touch(n, Math.max(o.size, n.size)));
      continue;
    }
    if (o) out.push(touch(o, o.size));
    if (n) out.push(touch(n, n.size));
  }
  return out;
}

/** The attributes (top-level names) an UpdateItem sets, removes, adds to or deletes from; 'all' when it uses the legacy AttributeUpdates. */
function changedAttributes(input: Json): ReadonlySet<string> | 'all' {
  if (typeof input.UpdateExpression !== 'string') return input.AttributeUpdates ? new Set(Object.keys(input.AttributeUpdates)) : 'all';
  return new Set(parseUpdate(input).keys());
}

/**
 * An UpdateItem's effect on each top-level attribute it names: the value it
 * sets when that is a plain `:value`, null when it removes it, undefined when
 * it cannot tell (an expression, ADD, DELETE).
 */
function parseUpdate(input: Json): Map<string, AttributeValue | null | undefined> {
  const names = (input.ExpressionAttributeNames as Record<string, string> | undefined) ?? {};
  const values = (input.ExpressionAttributeValues as Record<string, AttributeValue> | undefined) ?? {};
  const resolve = (path: string) => {
    const top = path.trim().split(/[.[]/)[0]!;
    return top.startsWith('#') ? (names[top] ?? top) : top;
  };
  const out = new Map<string, AttributeValue | null | undefined>();
  const expr = typeof input.UpdateExpression === 'string' ? input.UpdateExpression : '';
  const clauses = expr.split(/\b(SET|REMOVE|ADD|DELETE)\b/i);
  for (let i = 1; i < clauses.length; i += 2) {
    const verb = clauses[i]!.toUpperCase();
    for (const part of splitTopLevel(clauses[i + 1] ?? '')) {
      if (!part.trim()) continue;
      if (verb === 'SET') {
        const eq = part.indexOf('=');
        if (eq < 0) continue;
        const rhs = part.slice(eq + 1).trim();
        out.set(resolve(part.slice(0, eq)), /^:[A-Za-z0-9_]+$/.test(rhs) ? values[rhs] : undefined);
      } else if (verb === 'REMOVE') {
        out.set(resolve(part), null);
      } else {
        out.set(resolve(part.trim().split(/\s+/)[0]!), undefined);
      }
    }
  }
  return out;
}

function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '(') depth++;
    else if (s[i] === ')') depth--;
    else if (s[i] === ',' && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return parts;
}

/**
 * An UpdateItem's new image as far as the indexes go, before it runs: the
 * index keys it sets to a plain value or removes, the rest as it was; the size
 * as it was (the charge afterwards uses the real image).
 */
function predictUpdate(s: Schema, before: Shadow | null, input: Json): Shadow {
  const effects = typeof input.UpdateExpression === 'string' ? parseUpdate(input) : new Map<string, AttributeValue | null | undefined>();
  const entries = new Map<string, Entry | null>();
  for (const index of s.indexes) {
    const o = before?.entries.get(index.name) ?? null;
    const keyValue = (attr: string | null, was: string | null | undefined): string | null | undefined => {
      if (!attr) return null;
      const e = effects.get(attr);
      if (e === null) return undefined; // removed
      if (e) return avString(e);
      return was ?? undefined;
    };
    const pk = keyValue(index.pk, o?.pk);
    const sk = keyValue(index.sk, o?.sk);
    const touchesIndex = [...effects.keys()].some((a) => a === index.pk || a === index.sk);
    if (!pk || sk === undefined) entries.set(index.name, null);
    else if (o && !touchesIndex)
      entries.set(index.name, { ...o, digest: `${o.digest}~` }); // same keys, (presumably) new attributes
    else entries.set(index.name, { pk, sk, size: o?.size ?? 0, digest: '' });
  }
  return { size: before?.size ?? 0, entries };
}

/** The partition key value a Query reads: `<key> = :v` in KeyConditionExpression (or the legacy KeyConditions EQ). */
function partitionValueOf(input: Json, attr: string): string | undefined {
  const names = (input.ExpressionAttributeNames as Record<string, string> | undefined) ?? {};
  const values = (input.ExpressionAttributeValues as Record<string, AttributeValue> | undefined) ?? {};
  if (typeof input.KeyConditionExpression === 'string') {
    const resolve = (x: string) => (x.startsWith('#') ? names[x] : x);
    for (const part of input.KeyConditionExpression.split(/\s+AND\s+/i)) {
      const m = /^\s*\(?\s*([#:\w.-]+)\s*=\s*([#:\w.-]+)\s*\)?\s*$/.exec(part);
      if (!m) continue;
      const [a, b] = [m[1]!, m[2]!];
      if (resolve(a) === attr && b.startsWith(':') && values[b]) return avString(values[b]);
      if (resolve(b) === attr && a.startsWith(':') && values[a]) return avString(values[a]);
    }
    return undefined;
  }
  const kc = (input.KeyConditions as Record<string, { ComparisonOperator?: string; AttributeValueList?: AttributeValue[] }> | undefined)?.[attr];
  return kc?.ComparisonOperator === 'EQ' && kc.AttributeValueList?.[0] ? avString(kc.AttributeValueList[0]) : undefined;
}

/** Whether a read returns whole items (no projection): then what it returns is what it is charged for. */
function whole(input: Json): boolean {
  return (
    !input.ProjectionExpression &&
    !input.AttributesToGet &&
    (input.Select === undefined || input.Select === 'ALL_ATTRIBUTES' || input.Select === 'ALL_PROJECTED_ATTRIBUTES')
  );
}

function parseBody(res: Forwarded): Json {
  try {
    const raw = res.headers['content-encoding'] === 'gzip' ? gunzipSync(res.body) : res.body;
    return raw.length ? (JSON.parse(raw.toString('utf8')) as Json) : {};
  } catch {
    return {};
  }
}

function errorName(out: Json): string {
  return typeof out.__type === 'string' ? (out.__type.split('#').pop() ?? '') : '';
}

function toReply(res: Forwarded): Reply {
  return { status: res.status, headers: res.headers, body: res.body };
}

/** DynamoDB Local's answer with another body (a batch's merged unprocessed elements): its length and CRC32 made to match. */
function rewritten(res: Forwarded, out: Json): Reply {
  const body = Buffer.from(JSON.stringify(out));
  const headers: IncomingHttpHeaders = { ...res.headers, 'content-length': String(body.length), 'x-amz-crc32': String(crc32(body)) };
  delete headers['content-encoding'];
  delete headers['transfer-encoding'];
  return { status: res.status, headers, body };
}

function jsonReply(status: number, payload: Json): Reply {
  const body = Buffer.from(JSON.stringify(payload));
  return {
    status,
    headers: {
      'content-type': 'application/x-amz-json-1.0',
      'content-length': String(body.length),
      'x-amzn-requestid': randomUUID(),
      'x-amz-crc32': String(crc32(body)),
    },
    body,
  };
}
