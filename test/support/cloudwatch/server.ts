/**
 * A CloudWatch STAND-IN for tests: not CloudWatch, not an emulator. moto (the emulator the
 * integration tests use for DescribeAlarms) returns no values for GetMetricData metric math,
 * cannot fail or stall a call on cue, and does not count calls; where a test needs any of those
 * (the gate-provider contract, the chaos topology), this small server speaks
 * CloudWatch's wire protocol well enough that the unmodified `@aws-sdk/client-cloudwatch` client
 * reaches it through `endpoint` / AWS_ENDPOINT_URL_CLOUDWATCH, for two operations only.
 *
 * Wire protocol (verified against @aws-sdk/client-cloudwatch 3.1164.0): AWS JSON 1.0 with the
 * awsQueryCompatible trait. A request is `POST /` with `content-type: application/x-amz-json-1.0`,
 * `x-amz-target: GraniteServiceVersion20100801.<Operation>` and `x-amzn-query-mode: true`;
 * timestamps travel as epoch seconds (JSON numbers, possibly fractional) both ways. An error is
 * `{"__type": "<shape id>", "message": …}` plus the header `x-amzn-query-error: <Code>;<Sender|Receiver>`;
 * the SDK takes the code from that header first and maps it to the modelled exception whose
 * awsQueryError code it is: ValidationError → `ValidationException`, InternalServiceError →
 * `InternalServiceFault`, InvalidNextToken → `InvalidNextToken`; an unmodelled code such as
 * Throttling becomes a `CloudWatchServiceException` named after the code (`Throttling`, which
 * the SDK's retry strategy treats as throttling). Signatures are not checked.
 *
 * What it implements:
 *  - DescribeAlarms: AlarmNames (at most 100, else ValidationError), AlarmNamePrefix (not with
 *    AlarmNames: InvalidParameterCombination), AlarmTypes (default MetricAlarm only; composite
 *    alarms only when CompositeAlarm is asked for), StateValue, MaxRecords (1–100, default 50) and
 *    NextToken. Alarms come back sorted by name; unknown names are simply absent. Returned fields:
 *    AlarmName, AlarmArn, StateValue, StateReason, StateUpdatedTimestamp,
 *    StateTransitionedTimestamp, AlarmConfigurationUpdatedTimestamp, ActionsEnabled and empty
 *    action lists; a composite also has AlarmRule.
 *  - GetMetricData over datapoints the test puts: at most 500 queries with Ids matching
 *    ^[a-z][a-zA-Z0-9_]*$ (unique); StartTime (inclusive) and EndTime (exclusive); ScanBy (default
 *    TimestampDescending: newest first). A MetricStat query aggregates the raw datapoints of the
 *    metric whose namespace, name and exact dimension set match into Period buckets aligned on
 *    StartTime (rounded down to the minute, or to the period when it is under a minute), with
 *    Sum, Average, Minimum, Maximum, SampleCount or pNN[.N] (nearest-rank percentile over the raw
 *    values: CloudWatch's own percentiles are approximations too). An Expression query combines
 *    other queries' results with + - * / ^, unary minus, parentheses and numeric constants, as
 *    CloudWatch's metric math documents it: a value missing from one time series at a timestamp
 *    another one has is treated as 0, and a datapoint whose computation divides by zero is DROPPED
 *    (CloudWatch's documented behaviour; the JSON protocol could carry "NaN", but CloudWatch does
 *    not return one). Only queries with ReturnData !== false are returned, in request order, each
 *    with StatusCode 'Complete'. Label defaults to the MetricName for a metric and to the Id for an
 *    expression.
 *  - Faults: failNext (an error reply, by CloudWatch error code), delayNext (held replies, for
 *    timeout and abort tests; all released by stop()), and `calls` for assertions.
 *
 * What it does not do: any other operation (an error with code InvalidAction, which the SDK names
 * so); alarm evaluation (alarm states are whatever the test sets); a metric alarm's metric
 * configuration (Namespace, Threshold… are absent); ChildrenOfAlarmName, ParentsOfAlarmName and ActionPrefix (ValidationError naming the
 * parameter); log alarms; GetMetricData pagination (MaxDatapoints is ignored, NextToken is refused),
 * Metrics Insights queries, metric math functions (FILL, IF, METRICS()… are a ValidationError that
 * names them) and comparison operators; units; the coarser StartTime rounding CloudWatch applies to
 * data older than 15 days, and data retention; cross-account queries; authentication.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { closeNow, listenOnLoopback } from '../local-server.js';

export type AlarmState = 'OK' | 'ALARM' | 'INSUFFICIENT_DATA';
export type AlarmType = 'MetricAlarm' | 'CompositeAlarm';

export interface MetricRef {
  namespace: string;
  metricName: string;
  dimensions?: Record<string, string>;
}

/** An error reply. `type` is a CloudWatch error code (Throttling, InternalServiceError, ValidationError…) or a modelled shape name. */
export interface Fault {
  type: string;
  message: string;
  status?: number;
}

export interface Call {
  operation: string;
  input: unknown;
}

export interface CloudWatchStandInOptions {
  account?: string;
  region?: string;
}

interface Alarm {
  name: string;
  type: AlarmType;
  state: AlarmState;
  reason: string;
  rule: string;
  created: number;
  updated: number;
  transitioned: number;
}

interface Datapoint {
  at: number;
  value: number;
}

/** An error answered on the wire: `code` is the awsQuery error code (the x-amzn-query-error header). */
class CloudWatchError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/**
 * CloudWatch's modelled errors, from the service model in @aws-sdk/client-cloudwatch: awsQuery code
 * → shape name, HTTP status and the member that carries the message (the model spells it both ways).
 */
const ERRORS: Record<string, { shape: string; status: number; member: 'message' | 'Message' }> = {
  ValidationError: { shape: 'com.amazonaws.cloudwatch#ValidationException', status: 400, member: 'message' },
  InvalidParameterValue: { shape: 'com.amazonaws.cloudwatch#InvalidParameterValueException', status: 400, member: 'message' },
  InvalidParameterCombination: { shape: 'com.amazonaws.cloudwatch#InvalidParameterCombinationException', status: 400, member: 'message' },
  MissingParameter: { shape: 'com.amazonaws.cloudwatch#MissingRequiredParameterException', status: 400, member: 'message' },
  InvalidNextToken: { shape: 'com.amazonaws.cloudwatch#InvalidNextToken', status: 400, member: 'message' },
  InvalidFormat: { shape: 'com.amazonaws.cloudwatch#InvalidFormatFault', status: 400, member: 'message' },
  LimitExceeded: { shape: 'com.amazonaws.cloudwatch#LimitExceededFault', status: 400, member: 'message' },
  LimitExceededException: { shape: 'com.amazonaws.cloudwatch#LimitExceededException', status: 400, member: 'Message' },
  ResourceNotFound: { shape: 'com.amazonaws.cloudwatch#ResourceNotFound', status: 404, member: 'message' },
  ResourceNotFoundException: { shape: 'com.amazonaws.cloudwatch#ResourceNotFoundException', status: 404, member: 'Message' },
  ConcurrentModificationException: { shape: 'com.amazonaws.cloudwatch#ConcurrentModificationException', status: 429, member: 'Message' },
  InternalServiceError: { shape: 'com.amazonaws.cloudwatch#InternalServiceFault', status: 500, member: 'Message' },
  // Not in the model; what the service's front end answers when it throttles.
  Throttling: { shape: 'com.amazon.coral.availability#ThrottlingException', status: 400, member: 'message' },
};
const CODE_OF_SHAPE = new Map(Object.entries(ERRORS).map(([code, e]) => [e.shape.split('#')[1]!, code]));

const TARGET_PREFIX = 'GraniteServiceVersion20100801.';
const CONTENT_TYPE = 'application/x-amz-json-1.0';
const ID = /^[a-z][a-zA-Z0-9_]*$/;
const STATES: readonly string[] = ['OK', 'ALARM', 'INSUFFICIENT_DATA'];

export class CloudWatchStandIn {
  /** Every request received, in order, failed and held ones included. */
  readonly calls: Call[] = [];
  url = '';
  private server: Server | null = null;
  private readonly alarms = new Map<string, Alarm>();
  private readonly metrics = new Map<string, Datapoint[]>();
  private readonly faults: Fault[] = [];
  private readonly delays: number[] = [];
  private readonly held = new Set<() => void>();
  private readonly inFlight = new Set<Promise<void>>();
  private waiters: { count: number; resolve: () => void; reject: (e: Error) => void }[] = [];

  constructor(private readonly o: CloudWatchStandInOptions = {}) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const p = this.handle(req, res)
        .catch((err: unknown) => {
          if (!res.headersSent) res.writeHead(500).end(String(err));
        })
        .finally(() => this.inFlight.delete(p));
      this.inFlight.add(p);
    });
    this.url = await listenOnLoopback(this.server);
    return this;
  }

  /** Releases every held reply (it is answered), waits for the answers, then closes every connection. */
  async stop(): Promise<void> {
    for (const release of [...this.held]) release();
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
    for (const w of this.waiters) w.reject(new Error('CloudWatch stand-in stopped'));
    this.waiters = [];
    const server = this.server;
    this.server = null;
    await closeNow(server ?? undefined);
  }

  /** Clears alarms, datapoints, pending faults and recorded calls. */
  reset(): void {
    this.alarms.clear();
    this.metrics.clear();
    this.faults.length = 0;
    this.delays.length = 0;
    this.calls.length = 0;
  }

  /**
   * Creates or updates an alarm. StateUpdatedTimestamp becomes `at` (default now);
   * StateTransitionedTimestamp too, unless the state is unchanged. A composite alarm's AlarmRule is
   * `rule` (default `FALSE`, a valid rule).
   */
  setAlarm(name: string, state: AlarmState, o: { reason?: string; at?: Date; type?: AlarmType; rule?: string } = {}): void {
    if (!name || name.length > 255) throw new Error(`alarm name must be 1 to 255 characters: ${JSON.stringify(name)}`);
    if (!STATES.includes(state)) throw new Error(`unknown alarm state ${String(state)}`);
    const at = (o.at ?? new Date()).getTime();
    const prev = this.alarms.get(name);
    this.alarms.set(name, {
      name,
      type: o.type ?? prev?.type ?? 'MetricAlarm',
      state,
      reason: o.reason ?? `Set by the test (CloudWatch stand-in) to ${state}`,
      rule: o.rule ?? prev?.rule ?? 'FALSE',
      created: prev?.created ?? at,
      updated: at,
      transitioned: prev && prev.state === state ? prev.transitioned : at,
    });
  }

  /** One raw sample (as PutMetricData with a Value) for the metric with exactly these dimensions. */
  putDatapoint(metric: MetricRef, at: Date, value: number): void {
    if (!Number.isFinite(value)) throw new Error(`a datapoint must be a finite number, got ${value}`);
    const key = metricKey(metric.namespace, metric.metricName, metric.dimensions ?? {});
    const list = this.metrics.get(key) ?? [];
    list.push({ at: at.getTime(), value });
    this.metrics.set(key, list);
  }

  /** The next `n` requests (any operation) are answered with this error. */
  failNext(n: number, error: Fault): void {
    for (let i = 0; i < n; i++) this.faults.push(error);
  }

  /** The next `n` requests are held `ms` before they are answered; stop() releases them at once. */
  delayNext(n: number, ms: number): void {
    for (let i = 0; i < n; i++) this.delays.push(ms);
  }

  /** Settles once `count` requests in all have been received (e.g. before aborting a held one). */
  waitForCalls(count: number): Promise<void> {
    if (this.calls.length >= count) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ count, resolve, reject }));
  }

  private get account(): string {
    return this.o.account ?? '000000000000';
  }

  private get region(): string {
    return this.o.region ?? process.env.AWS_REGION ?? 'us-east-1';
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body = '';
    for await (const chunk of req) body += (chunk as Buffer).toString();
    const target = String(req.headers['x-amz-target'] ?? '');
    const operation = target.startsWith(TARGET_PREFIX) ? target.slice(TARGET_PREFIX.length) : target;
    let input: Record<string, unknown> = {};
    let parseError: CloudWatchError | null = null;
    try {
      const parsed: unknown = body ? JSON.parse(body) : {};
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
      input = parsed as Record<string, unknown>;
    } catch {
      parseError = new CloudWatchError('SerializationException', 'The request body is not a JSON object.', 400);
    }
    this.calls.push({ operation, input });
    this.waiters = this.waiters.filter((w) => (this.calls.length >= w.count ? (w.resolve(), false) : true));
    // Faults are taken in arrival order, whatever the delay.
    const delay = this.delays.shift();
    const fault = this.faults.shift();
    if (delay !== undefined) await this.hold(res, delay);
    if (res.destroyed || res.writableEnded) return; // the client gave up (an abort or its own timeout)
    try {
      if (fault) throw new CloudWatchError(CODE_OF_SHAPE.get(fault.type) ?? fault.type, fault.message, fault.status);
      if (parseError) throw parseError;
      if (!target.startsWith(TARGET_PREFIX)) throw new CloudWatchError('InvalidAction', `Unknown x-amz-target ${JSON.stringify(target)}`, 400);
      const out = this.call(operation, input);
      res.writeHead(200, { 'content-type': CONTENT_TYPE, 'x-amzn-requestid': randomUUID() }).end(JSON.stringify(out));
    } catch (err) {
      const e = err instanceof CloudWatchError ? err : new CloudWatchError('InternalServiceError', err instanceof Error ? err.message : String(err), 500);
      const known = ERRORS[e.code];
      const status = e.status ?? known?.status ?? 400;
      const shape = known?.shape ?? (e.code === 'InvalidAction' ? 'com.amazon.coral.service#UnknownOperationException' : `com.amazonaws.cloudwatch#${e.code}`);
      res
        .writeHead(status, {
          'content-type': CONTENT_TYPE,
          'x-amzn-requestid': randomUUID(),
          'x-amzn-query-error': `${e.code};${status >= 500 ? 'Receiver' : 'Sender'}`,
        })
        .end(JSON.stringify({ __type: shape, [known?.member ?? 'message']: e.message }));
    }
  }

  private hold(res: ServerResponse, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const release = () => {
        clearTimeout(timer);
        this.held.delete(release);
        res.off('close', release);
        resolve();
      };
      const timer = setTimeout(release, ms);
      this.held.add(release);
      res.on('close', release);
    });
  }

  private call(op: string, input: Record<string, unknown>): unknown {
    switch (op) {
      case 'DescribeAlarms':
        return this.describeAlarms(input);
      case 'GetMetricData':
        return this.getMetricData(input);
      default:
        throw new CloudWatchError(
          'InvalidAction',
          `Operation ${op} is not served by the tests' CloudWatch stand-in (DescribeAlarms and GetMetricData only).`,
          400,
        );
    }
  }

  // ---- DescribeAlarms ------------------------------------------------------------------------

  private describeAlarms(i: Record<string, unknown>): unknown {
    for (const k of ['ChildrenOfAlarmName', 'ParentsOfAlarmName', 'ActionPrefix']) {
      if (i[k] !== undefined && i[k] !== null) throw validation(`${k} is not supported by the CloudWatch stand-in.`);
    }
    const names = strList(i.AlarmNames, 'AlarmNames');
    if (names && names.length > 100) {
      throw validation(
        `1 validation error detected: Value '[${names.join(', ')}]' at 'alarmNames' failed to satisfy constraint: Member must have length less than or equal to 100`,
      );
    }
    const prefix = optStr(i.AlarmNamePrefix, 'AlarmNamePrefix');
    if (names && prefix !== undefined) throw new CloudWatchError('InvalidParameterCombination', 'AlarmNamePrefix and AlarmNames cannot be specified together.');
    const types = strList(i.AlarmTypes, 'AlarmTypes') ?? ['MetricAlarm'];
    for (const t of types) {
      if (t !== 'MetricAlarm' && t !== 'CompositeAlarm' && t !== 'LogAlarm') {
        throw validation(
          `1 validation error detected: Value '[${types.join(', ')}]' at 'alarmTypes' failed to satisfy constraint: Member must satisfy constraint: [Member must satisfy enum value set: [CompositeAlarm, MetricAlarm, LogAlarm]]`,
        );
      }
    }
    const state = optStr(i.StateValue, 'StateValue');
    if (state !== undefined && !STATES.includes(state)) {
      throw validation(
        `1 validation error detected: Value '${state}' at 'stateValue' failed to satisfy constraint: Member must satisfy enum value set: [INSUFFICIENT_DATA, ALARM, OK]`,
      );
    }
    const max = i.MaxRecords === undefined || i.MaxRecords === null ? 50 : i.MaxRecords;
    if (typeof max !== 'number' || !Number.isInteger(max) || max < 1 || max > 100) {
      throw validation(
        `1 validation error detected: Value '${JSON.stringify(max)}' at 'maxRecords' failed to satisfy constraint: Member must have value between 1 and 100`,
      );
    }
    const token = optStr(i.NextToken, 'NextToken');
    let after = '';
    if (token !== undefined) {
      const decoded = Buffer.from(token, 'base64url').toString('utf8');
      if (!decoded.startsWith('after:')) throw new CloudWatchError('InvalidNextToken', 'The service cannot process the NextToken.');
      after = decoded.slice('after:'.length);
    }
    const wanted = names ? new Set(names) : null;
    const matching = [...this.alarms.values()]
      .filter((a) => types.includes(a.type))
      .filter((a) => !wanted || wanted.has(a.name))
      .filter((a) => prefix === undefined || a.name.startsWith(prefix))
      .filter((a) => state === undefined || a.state === state)
      .filter((a) => a.name > after)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const page = matching.slice(0, max);
    const more = matching.length > max;
    return {
      MetricAlarms: page.filter((a) => a.type === 'MetricAlarm').map((a) => this.alarmOut(a)),
      CompositeAlarms: page.filter((a) => a.type === 'CompositeAlarm').map((a) => ({ ...this.alarmOut(a), AlarmRule: a.rule })),
      ...(more ? { NextToken: Buffer.from(`after:${page.at(-1)!.name}`, 'utf8').toString('base64url') } : {}),
    };
  }

  private alarmOut(a: Alarm): Record<string, unknown> {
    return {
      AlarmName: a.name,
      AlarmArn: `arn:aws:cloudwatch:${this.region}:${this.account}:alarm:${a.name}`,
      AlarmConfigurationUpdatedTimestamp: a.created / 1000,
      ActionsEnabled: true,
      OKActions: [],
      AlarmActions: [],
      InsufficientDataActions: [],
      StateValue: a.state,
      StateReason: a.reason,
      StateUpdatedTimestamp: a.updated / 1000,
      StateTransitionedTimestamp: a.transitioned / 1000,
    };
  }

  // ---- GetMetricData -------------------------------------------------------------------------

  private getMetricData(i: Record<string, unknown>): unknown {
    const queries = i.MetricDataQueries;
    if (!Array.isArray(queries) || queries.length === 0) throw validation('The parameter MetricDataQueries is required and must hold at least one query.');
    if (queries.length > 500) {
      throw validation(
        `1 validation error detected: Value at 'metricDataQueries' failed to satisfy constraint: Member must have length less than or equal to 500`,
      );
    }
    if (i.NextToken !== undefined && i.NextToken !== null)
      throw new CloudWatchError('InvalidNextToken', 'The CloudWatch stand-in never paginates GetMetricData, so no NextToken is valid.');
    const start = timestamp(i.StartTime, 'StartTime');
    const end = timestamp(i.EndTime, 'EndTime');
    if (start >= end) throw validation('The parameter StartTime must be less than the parameter EndTime.');
    const scanBy = optStr(i.ScanBy, 'ScanBy') ?? 'TimestampDescending';
    if (scanBy !== 'TimestampDescending' && scanBy !== 'TimestampAscending') {
      throw validation(
        `1 validation error detected: Value '${scanBy}' at 'scanBy' failed to satisfy constraint: Member must satisfy enum value set: [TimestampDescending, TimestampAscending]`,
      );
    }

    const byId = new Map<string, Record<string, unknown>>();
    queries.forEach((q: unknown, n) => {
      const member = `MetricDataQueries.member.${n + 1}`;
      if (typeof q !== 'object' || q === null) throw validation(`The parameter ${member} must be a structure.`);
      const query = q as Record<string, unknown>;
      const id = query.Id;
      if (typeof id !== 'string' || !id) throw validation(`The parameter ${member}.Id is required.`);
      if (id.length > 255 || !ID.test(id)) {
        throw validation(
          `The value ${id} for parameter ${member}.Id is not valid: it must start with a lowercase letter and hold only letters, digits and underscores (^[a-z][a-zA-Z0-9_]*$).`,
        );
      }
      if (byId.has(id)) throw validation(`The value ${id} for parameter ${member}.Id is used by more than one query.`);
      const hasStat = query.MetricStat !== undefined && query.MetricStat !== null;
      const hasExpr = query.Expression !== undefined && query.Expression !== null;
      if (hasStat && hasExpr) throw validation(`The parameters ${member}.MetricStat and ${member}.Expression are mutually exclusive.`);
      if (!hasStat && !hasExpr) throw validation(`The parameter ${member}.MetricStat is required.\n`);
      byId.set(id, query);
    });

    const results = new Map<string, Series>();
    const resolving = new Set<string>();
    const resolve = (id: string): Series => {
      const done = results.get(id);
      if (done) return done;
      const query = byId.get(id);
      if (!query) throw validation(`Unrecognized metric or expression id: ${id}.`);
      if (resolving.has(id)) throw validation(`Circular reference: the expression ${id} refers to itself.`);
      resolving.add(id);
      const series =
        query.MetricStat !== undefined && query.MetricStat !== null
          ? this.metricStat(query.MetricStat, `${id}`, start, end)
          : evaluate(String(query.Expression), id, resolve);
      resolving.delete(id);
      results.set(id, series);
      return series;
    };

    const out: Record<string, unknown>[] = [];
    for (const [id, query] of byId) {
      const series = resolve(id);
      if (query.ReturnData === false) continue;
      const points = [...series.entries()].sort((a, b) => (scanBy === 'TimestampAscending' ? a[0] - b[0] : b[0] - a[0]));
      const stat = query.MetricStat as { Metric?: { MetricName?: unknown } } | undefined;
      const label = typeof query.Label === 'string' ? query.Label : stat ? String(stat.Metric?.MetricName) : id;
      out.push({ Id: id, Label: label, Timestamps: points.map(([t]) => t / 1000), Values: points.map(([, v]) => v), StatusCode: 'Complete', Messages: [] });
    }
    return { MetricDataResults: out, Messages: [] };
  }

  private metricStat(raw: unknown, id: string, startMs: number, endMs: number): Series {
    const s = raw as Record<string, unknown>;
    const m = (s.Metric ?? {}) as Record<string, unknown>;
    if (typeof m.Namespace !== 'string' || !m.Namespace) throw validation(`The parameter MetricStat.Metric.Namespace of query ${id} is required.`);
    if (typeof m.MetricName !== 'string' || !m.MetricName) throw validation(`The parameter MetricStat.Metric.MetricName of query ${id} is required.`);
    const dimensions: Record<string, string> = {};
    if (m.Dimensions !== undefined && m.Dimensions !== null) {
      if (!Array.isArray(m.Dimensions) || m.Dimensions.length > 30)
        throw validation(`MetricStat.Metric.Dimensions of query ${id} must be a list of at most 30 dimensions.`);
      for (const d of m.Dimensions as Record<string, unknown>[]) {
        if (typeof d?.Name !== 'string' || typeof d.Value !== 'string') throw validation(`Each dimension of query ${id} needs a Name and a Value.`);
        if (d.Name in dimensions) throw validation(`The dimension ${d.Name} appears twice in query ${id}.`);
        dimensions[d.Name] = d.Value;
      }
    }
    const period = s.Period;
    if (typeof period !== 'number' || !Number.isInteger(period) || period < 1 || (period < 60 ? ![1, 5, 10, 20, 30].includes(period) : period % 60 !== 0)) {
      throw validation(`The parameter MetricStat.Period of query ${id} must be 1, 5, 10, 20, 30 or a multiple of 60, got ${String(period)}.`);
    }
    const stat = s.Stat;
    if (typeof stat !== 'string') throw validation(`The parameter MetricStat.Stat of query ${id} is required.`);
    const aggregate = statistic(stat, id);
    const periodMs = period * 1000;
    // CloudWatch rounds StartTime down: to the minute, or to the period's division of a minute.
    const first = Math.floor(startMs / Math.min(periodMs, 60_000)) * Math.min(periodMs, 60_000);
    const buckets = new Map<number, number[]>();
    for (const p of this.metrics.get(metricKey(m.Namespace, m.MetricName, dimensions)) ?? []) {
      if (p.at < first || p.at >= endMs) continue;
      const bucket = first + Math.floor((p.at - first) / periodMs) * periodMs;
      const values = buckets.get(bucket) ?? [];
      values.push(p.value);
      buckets.set(bucket, values);
    }
    return new Map([...buckets].map(([t, values]) => [t, aggregate(values)]));
  }
}

// ---- statistics -------------------------------------------------------------------------------

function statistic(stat: string, id: string): (values: number[]) => number {
  switch (stat) {
    case 'Sum':
      return (v) => v.reduce((a, b) => a + b, 0);
    case 'Average':
      return (v) => v.reduce((a, b) => a + b, 0) / v.length;
    case 'Minimum':
      return (v) => Math.min(...v);
    case 'Maximum':
      return (v) => Math.max(...v);
    case 'SampleCount':
      return (v) => v.length;
  }
  const p = /^p(\d{1,2}(?:\.\d+)?|100(?:\.0+)?)$/.exec(stat);
  if (p) {
    const q = Number(p[1]);
    // Nearest rank over the raw samples.
    return (v) => {
      const sorted = [...v].sort((a, b) => a - b);
      return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((q / 100) * sorted.length))) - 1]!;
    };
  }
  throw validation(`The statistic ${stat} of query ${id} is not supported by the CloudWatch stand-in (Sum, Average, Minimum, Maximum, SampleCount, pNN).`);
}

// ---- metric math ------------------------------------------------------------------------------

/** Timestamp (ms) → value. */
type Series = Map<number, number>;
type Value = number | Series;
type Token = { kind: 'num'; value: number } | { kind: 'id'; name: string } | { kind: 'op'; op: string };

function tokenize(expr: string, id: string): Token[] {
  const tokens: Token[] = [];
  const re = /\s*(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|(==|!=|<=|>=|&&|\|\||[-+*/^()<>,[\]"']))/y;
  let at = 0;
  while (at < expr.length) {
    if (/^\s*$/.test(expr.slice(at))) break;
    re.lastIndex = at;
    const m = re.exec(expr);
    if (!m) throw validation(`Error in expression ${id}: unexpected character ${JSON.stringify(expr.slice(at).trim()[0])}.`);
    at = re.lastIndex;
    if (m[1] !== undefined) tokens.push({ kind: 'num', value: Number(m[1]) });
    else if (m[2] !== undefined) tokens.push({ kind: 'id', name: m[2] });
    else tokens.push({ kind: 'op', op: m[3]! });
  }
  // Functions (anything called) are named in one error.
  const functions = tokens
    .filter((t, n) => t.kind === 'id' && tokens[n + 1]?.kind === 'op' && (tokens[n + 1] as { op: string }).op === '(')
    .map((t) => (t as { name: string }).name);
  if (functions.length) {
    throw validation(
      `Error in expression ${id}: unsupported function${functions.length > 1 ? 's' : ''} ${[...new Set(functions)].join(', ')} (the CloudWatch stand-in evaluates + - * / ^, parentheses, numbers and query ids only).`,
    );
  }
  const other = tokens.filter((t) => (t.kind === 'op' && !'+-*/^()'.includes(t.op)) || (t.kind === 'id' && ['AND', 'OR'].includes(t.name)));
  if (other.length) {
    throw validation(
      `Error in expression ${id}: unsupported operator or syntax ${other.map((t) => (t.kind === 'op' ? t.op : (t as { name: string }).name)).join(' ')} (the CloudWatch stand-in evaluates + - * / ^, parentheses, numbers and query ids only).`,
    );
  }
  return tokens;
}

/** Evaluates `expr` (the Expression of query `id`); `resolve` gives another query's time series. */
function evaluate(expr: string, id: string, resolve: (id: string) => Series): Series {
  const tokens = tokenize(expr, id);
  let pos = 0;
  const peek = (): Token | undefined => tokens[pos];
  const isOp = (op: string): boolean => {
    const t = peek();
    return t?.kind === 'op' && t.op === op;
  };
  const fail = (what: string): never => {
    throw validation(`Error in expression ${id}: ${what}.`);
  };
  // expr := term (('+'|'-') term)* ; term := unary (('*'|'/') unary)* ; unary := '-' unary | power ; power := atom ('^' unary)?
  const sum = (): Value => {
    let left = term();
    while (isOp('+') || isOp('-')) {
      const op = (tokens[pos++] as { op: string }).op;
      left = combine(left, term(), op === '+' ? (a, b) => a + b : (a, b) => a - b);
    }
    return left;
  };
  const term = (): Value => {
    let left = unary();
    while (isOp('*') || isOp('/')) {
      const op = (tokens[pos++] as { op: string }).op;
      left = combine(left, unary(), op === '*' ? (a, b) => a * b : (a, b) => (b === 0 ? undefined : a / b));
    }
    return left;
  };
  const unary = (): Value => {
    if (isOp('-')) {
      pos++;
      return combine(0, unary(), (a, b) => a - b);
    }
    if (isOp('+')) {
      pos++;
      return unary();
    }
    return power();
  };
  const power = (): Value => {
    const base = atom();
    if (!isOp('^')) return base;
    pos++;
    return combine(base, unary(), (a, b) => a ** b);
  };
  const atom = (): Value => {
    const t = peek();
    if (!t) return fail('unexpected end of expression');
    pos++;
    if (t.kind === 'num') return t.value;
    if (t.kind === 'id') {
      if (t.name === id) fail(`the expression refers to itself`);
      return resolve(t.name);
    }
    if (t.op === '(') {
      const inner = sum();
      if (!isOp(')')) fail('missing )');
      pos++;
      return inner;
    }
    return fail(`unexpected ${t.op}`);
  };
  const result = sum();
  if (pos < tokens.length) fail(`unexpected ${JSON.stringify(tokens[pos])}`);
  if (typeof result === 'number') fail('the result of an expression must be a time series, not a number');
  return result as Series;
}

/**
 * Applies `f` pointwise, as metric math does: a scalar goes with every timestamp; between two time
 * series a value missing from one is 0; a datapoint `f` cannot compute (division by zero, or a
 * non-finite result) is dropped.
 */
function combine(a: Value, b: Value, f: (x: number, y: number) => number | undefined): Value {
  if (typeof a === 'number' && typeof b === 'number') {
    const r = f(a, b);
    if (r === undefined || !Number.isFinite(r)) throw validation('An expression divides a constant by zero.');
    return r;
  }
  const out: Series = new Map();
  const stamps = new Set([...(typeof a === 'number' ? [] : a.keys()), ...(typeof b === 'number' ? [] : b.keys())]);
  for (const t of stamps) {
    const x = typeof a === 'number' ? a : (a.get(t) ?? 0);
    const y = typeof b === 'number' ? b : (b.get(t) ?? 0);
    const r = f(x, y);
    if (r !== undefined && Number.isFinite(r)) out.set(t, r);
  }
  return out;
}

// ---- request fields ---------------------------------------------------------------------------

function validation(message: string): CloudWatchError {
  return new CloudWatchError('ValidationError', message);
}

function metricKey(namespace: string, name: string, dimensions: Record<string, string>): string {
  return JSON.stringify([namespace, name, Object.entries(dimensions).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))]);
}

function optStr(v: unknown, field: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw validation(`The parameter ${field} must be a string.`);
  return v;
}

function strList(v: unknown, field: string): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw validation(`The parameter ${field} must be a list of strings.`);
  return v as string[];
}

/** A request timestamp: epoch seconds (what the SDK sends), or an ISO string. Returns ms. */
function timestamp(v: unknown, field: string): number {
  if (typeof v === 'number' && Number.isFinite(v)) return Math.round(v * 1000);
  if (typeof v === 'string' && !Number.isNaN(Date.parse(v))) return Date.parse(v);
  throw validation(`The parameter ${field} is required.`);
}
