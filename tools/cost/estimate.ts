/**
 * The stack's monthly cost, recomputed from its synthesized CloudFormation
 * template so that the table of docs/operating/capacity-and-cost.md#monthly-cost cannot drift from what
 * deploys: it counts the resources the template holds (functions, schedules,
 * alarms, the dashboard, queues and their event source mappings, the table or
 * the Aurora cluster with its VPC) and the invocations they imply (a
 * `rate(1 minute)` schedule is 43,200 a month), and prices them at us-east-1
 * list prices. Free tiers are not subtracted.
 *
 * Two columns: idle (no rollout running, no work run) and busy (rollouts
 * running all month, `eventsPerMonth` rollout signals). What the template
 * cannot say — how long an invocation runs, how many DynamoDB units a tick
 * reads — is a named assumption in DEFAULT_ASSUMPTIONS, each with why.
 *
 * Pure: no network, no clock. `npm run cost` (cli.ts) synthesizes the stack
 * in-process and prints the estimate (report.ts); the prices are in
 * prices.ts, the assumptions in assumptions.ts, the metrics in metrics.ts.
 */
import { BATCH_TICK_SECONDS, FUNCTIONS, type FunctionName } from '../../shared/topology.js';
import { DEFAULT_ASSUMPTIONS, ENDPOINT_SERVICES, FLAG_READ_UNITS, IDLE_READ_UNITS, type Assumptions } from './assumptions.js';
import { describeGate, gatesCost, rolloutGauges } from './gates.js';
import { METRICS_BY_SERVICE, STACK_METRICS } from './metrics.js';
import { FREE_TIER, PRICES } from './prices.js';
import {
  fmtInt,
  kebab,
  NO_CHARGE_OF_THEIR_OWN,
  num,
  rateMinutes,
  sampledTraces,
  str,
  type CfnResource,
  type CfnTemplate,
  type CostEstimate,
  type FnInfo,
  type LineItem,
  type ScheduleCount,
} from './template.js';

/**
 * The monthly cost of the stack `template` describes, idle and busy, as line
 * items and totals. Pure: no network, no clock.
 */
export function estimateCost(template: CfnTemplate, assumptions: Assumptions = DEFAULT_ASSUMPTIONS): CostEstimate {
  const a = assumptions;
  const monthHours = a.daysPerMonth * 24;
  const monthMinutes = monthHours * 60;
  const monthSeconds = monthMinutes * 60;
  const resources = Object.entries(template.Resources);
  const ofType = (type: string) => resources.filter(([, r]) => r.Type === type);
  const props = (r: CfnResource) => r.Properties ?? {};
  const counted: Record<string, string[]> = {};
  const count = (type: string, ids: readonly string[]) => (counted[type] = [...(counted[type] ?? []), ...ids]);
  const lines: LineItem[] = [];
  const line = (l: LineItem) => lines.push(l);
  const mentions = (r: CfnResource, id: string) => JSON.stringify(r.Properties ?? {}).includes(`"${id}"`);

  // Functions, by what topology.ts calls them (the service name the stack sets).
  const fns: FnInfo[] = ofType('AWS::Lambda::Function').map(([id, r]) => {
    const p = props(r);
    const env: Record<string, unknown> = (p.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {};
    const service = typeof env.POWERTOOLS_SERVICE_NAME === 'string' ? env.POWERTOOLS_SERVICE_NAME : null;
    const role = service && service in FUNCTIONS ? (service as FunctionName) : null;
    return {
      id,
      role,
      // Not one of topology.ts's: a CDK helper (log retention), named without its hash.
      label: role ? kebab(role) : id.replace(/[0-9a-fA-F]{8,}$/, ''),
      memoryMb: num(p.MemorySize, 128),
      timeoutSeconds: num(p.Timeout, 3),
      active: (p.TracingConfig as { Mode?: string } | undefined)?.Mode === 'Active',
      store: typeof env.ROLLOUT_STORE === 'string' ? env.ROLLOUT_STORE : null,
      roleId: (p.Role as { 'Fn::GetAtt'?: [string, string] } | undefined)?.['Fn::GetAtt']?.[0] ?? null,
      activityTable: (env.ROLLOUT_ACTIVITY_TABLE as { Ref?: string } | undefined)?.Ref ?? null,
    };
  });
  count(
    'AWS::Lambda::Function',
    fns.map((f) => f.id),
  );
  const aurora = ofType('AWS::RDS::DBCluster').length > 0;
  const store: CostEstimate['store'] = aurora ? 'aurora' : 'dynamodb';
  const onDynamo = fns.some((f) => f.store === 'dynamodb');

  // Schedules: rate(…) rules and the functions they invoke.
  const unpriced = new Set<string>();
  const schedules: ScheduleCount[] = [];
  for (const [id, r] of ofType('AWS::Events::Rule')) {
    const p = props(r);
    if (typeof p.ScheduleExpression !== 'string') continue;
    const minutes = rateMinutes(p.ScheduleExpression);
    if (minutes === null) {
      unpriced.add(`AWS::Events::Rule (${p.ScheduleExpression}: only rate() schedules are counted)`);
      continue;
    }
    const targets = fns.filter((f) => JSON.stringify(p.Targets ?? []).includes(`"${f.id}"`)).map((f) => f.id);
    schedules.push({ rule: id, expression: p.ScheduleExpression, targets, perMonth: monthMinutes / minutes });
  }
  const customBuses = ofType('AWS::Events::EventBus').map(([id]) => id);
  const busRules = ofType('AWS::Events::Rule').filter(([, r]) => typeof props(r).ScheduleExpression !== 'string');
  count('AWS::Events::Rule', [...schedules.map((s) => s.rule), ...busRules.map(([id]) => id)]);
  const onCustomBus = (r: CfnResource) => customBuses.some((b) => str(props(r).EventBusName).includes(`"${b}"`));
  const signalTargets = new Set(
    fns.filter((f) => busRules.some(([, r]) => onCustomBus(r) && JSON.stringify(props(r).Targets ?? []).includes(`"${f.id}"`))).map((f) => f.id),
  );
  const apiTargets = new Set(fns.filter((f) => ofType('AWS::ApiGatewayV2::Integration').some(([, r]) => mentions(r, f.id))).map((f) => f.id));

  // Invocations a month, and each function's compute.
  const invocations: Record<string, { idle: number; busy: number }> = {};
  const lambdaCost = (n: number, ms: number, memoryMb: number) =>
    n * ((ms / 1000) * (memoryMb / 1024) * PRICES.lambdaArmGbSecond.usd + PRICES.lambdaRequest.usd);
  const coldStarts = (memoryMb: number) => a.coldStartsPerFunctionHour * monthHours * (a.initMs / 1000) * (memoryMb / 1024) * PRICES.lambdaArmGbSecond.usd;
  /**
   * A busy BatchPromoter invocation ticks every BATCH_TICK_SECONDS while its remaining time covers a wait and a tick,
   * and only while the next tick starts before the schedule's next invocation (functions/batch-promoter.ts): ticks at
   * 0, 10, … — by the timeout, up to the last start t with timeout − t ≥ 2 intervals and one more; by the schedule,
   * up to the last start before period − half an interval.
   */
  const busyTicks = (timeout: number, periodSeconds: number) =>
    Math.min(
      Math.floor((timeout - 2 * BATCH_TICK_SECONDS) / BATCH_TICK_SECONDS) + 2,
      Math.floor((periodSeconds - BATCH_TICK_SECONDS / 2) / BATCH_TICK_SECONDS) + 1,
    );
  let ticksPerMonth = 0;
  /** Busy BatchPromoter invocations: each ends reading the running rollouts and publishing their gauges. */
  let gaugeReads = 0;
  let idleReadUnits = 0;
  const mappings = ofType('AWS::Lambda::EventSourceMapping');
  const isScheduled = (f: FnInfo) => schedules.some((s) => s.targets.includes(f.id));
  /** Whether its role may receive from a queue: a scheduled one polls it once an invocation (the coordinator, the work DLQ). */
  const receives = (f: FnInfo) =>
    f.roleId !== null &&
    ofType('AWS::IAM::Policy').some(
      ([, p]) =>
        JSON.stringify(props(p).Roles ?? []).includes(`"${f.roleId}"`) && JSON.stringify(props(p).PolicyDocument ?? {}).includes('"sqs:ReceiveMessage"'),
    );
  for (const f of fns) {
    const scheduled = schedules.filter((s) => s.targets.includes(f.id)).reduce((n, s) => n + s.perMonth, 0);
    const rate = schedules
      .filter((s) => s.targets.includes(f.id))
      .map((s) => s.expression)
      .join(' + ');
    const mem = `${f.memoryMb} MB`;
    if (scheduled > 0) {
      const idleMs = f.role === 'batchPromoter' ? a.idleBatchInvocationMs : a.idleScheduledInvocationMs;
      let busyMs = idleMs;
      let busyBasis = 'same as idle (no work run open)';
      const looksAt = [
        ...(receives(f) ? ['a short poll of the work DLQ'] : []),
        f.activityTable ? 'its activity flag (the database only when it is raised)' : f.role === 'batchPromoter' ? "hasWork's two reads" : 'the open runs',
      ];
      if (f.role === 'batchPromoter') {
        const period = Math.min(...schedules.filter((x) => x.targets.includes(f.id)).map((x) => (30 * 24 * 60 * 60) / x.perMonth));
        const ticks = busyTicks(f.timeoutSeconds, period);
        busyMs = (ticks - 1) * BATCH_TICK_SECONDS * 1000 + a.tickMs;
        ticksPerMonth += scheduled * ticks;
        gaugeReads += scheduled;
        busyBasis = `${fmtInt(scheduled)} × ~${Math.round(busyMs / 1000)} s (${ticks} ticks ${BATCH_TICK_SECONDS} s apart, timeout ${f.timeoutSeconds} s) × ${mem}`;
      }
      idleReadUnits += scheduled * (f.role ? (IDLE_READ_UNITS[f.role] ?? 0) : 0);
      invocations[f.id] = { idle: scheduled, busy: scheduled };
      line({
        what: `${f.label}, ${rate}`,
        idle: lambdaCost(scheduled, idleMs, f.memoryMb) + coldStarts(f.memoryMb),
        busy: lambdaCost(scheduled, busyMs, f.memoryMb) + coldStarts(f.memoryMb),
        basis: `idle: ${fmtInt(scheduled)} × ~${idleMs} ms × ${mem} + requests (${looksAt.join(', then ')}); busy: ${busyBasis}`,
        freeTier: FREE_TIER.lambda,
      });
    } else if (signalTargets.has(f.id)) {
      invocations[f.id] = { idle: 0, busy: a.eventsPerMonth };
      line({
        what: `${f.label}, rollout signals`,
        idle: 0,
        busy: lambdaCost(a.eventsPerMonth, a.signalInvocationMs, f.memoryMb) + coldStarts(f.memoryMb),
        basis: `busy: ${fmtInt(a.eventsPerMonth)} × ~${a.signalInvocationMs} ms × ${mem} + requests`,
        freeTier: FREE_TIER.lambda,
      });
    } else if (apiTargets.has(f.id)) {
      invocations[f.id] = { idle: 0, busy: a.apiRequestsPerMonth };
      line({
        what: `${f.label}, HTTP API`,
        idle: 0,
        busy: lambdaCost(a.apiRequestsPerMonth, a.apiInvocationMs, f.memoryMb),
        basis: `busy: ${fmtInt(a.apiRequestsPerMonth)} requests × ~${a.apiInvocationMs} ms × ${mem}`,
        freeTier: FREE_TIER.lambda,
      });
    } else {
      // Every function has a line: what invokes it, and what an invocation costs when nothing in either column does.
      invocations[f.id] = { idle: 0, busy: 0 };
      const rules = busRules.filter(([, r]) => JSON.stringify(props(r).Targets ?? []).includes(`"${f.id}"`));
      const mapped = mappings.some(([, r]) => JSON.stringify(props(r).FunctionName ?? '').includes(`"${f.id}"`));
      const per1000 = lambdaCost(1000, a.eventInvocationMs, f.memoryMb);
      const onEvents = `~${a.eventInvocationMs} ms × ${mem} + request: US$ ${per1000.toFixed(4)} per 1,000 invocations; none idle, none from rollout signals`;
      line({
        what: f.role ? `${f.label}, ${rules.length || mapped ? 'on its events' : 'no trigger'}` : `${f.label} (CDK helper)`,
        idle: 0,
        busy: 0,
        basis: rules.length
          ? `when its rule matches (${rules.map(([, r]) => str(props(r).Description ?? '')).join('; ')}): ${onEvents}`
          : mapped
            ? `for each batch its queue delivers: ${onEvents}`
            : f.role
              ? 'nothing in this stack invokes it'
              : 'runs at deploy only',
        freeTier: FREE_TIER.lambda,
      });
    }
  }

  // X-Ray: only Active functions record traces of their own; a schedule's event carries no trace header to pass through.
  const traced = fns.filter((f) => f.active);
  const traces = (col: 'idle' | 'busy') => traced.reduce((n, f) => n + sampledTraces(invocations[f.id]![col], monthSeconds, a), 0);
  line({
    what: 'X-Ray traces',
    idle: traces('idle') * PRICES.xrayTrace.usd,
    busy: traces('busy') * PRICES.xrayTrace.usd,
    basis: `${traced.length} Active function(s) (${traced.map((f) => f.label).join(', ')}): idle ${fmtInt(traces('idle'))}, busy ${fmtInt(traces('busy'))} traces (1/s + 5 % sampled); PassThrough ones record none`,
    freeTier: FREE_TIER.xray,
  });

  // The store.
  const transitions = a.eventsPerMonth * a.transitionsPerSignal;
  if (onDynamo) {
    const idleRru = idleReadUnits;
    const busyRru = idleRru + a.eventsPerMonth * a.rruPerSignal + ticksPerMonth * a.rruPerTick + gaugeReads * a.rruPerRolloutRead * (1 + a.rolloutsRunning);
    const busyWru = a.eventsPerMonth * a.wruPerSignal + transitions * a.wruPerTransition + ticksPerMonth * a.wruPerTick;
    line({
      what: 'DynamoDB on-demand requests',
      idle: idleRru * PRICES.dynamoRead.usd,
      busy: busyRru * PRICES.dynamoRead.usd + busyWru * PRICES.dynamoWrite.usd,
      basis: `idle: ${fmtInt(idleRru)} RRU (the scheduled functions' empty reads, no write); busy: + ${a.rruPerSignal} RRU/${a.wruPerSignal} WRU a signal, ${a.wruPerTransition} WRU a transition, ${a.rruPerTick} RRU/${a.wruPerTick} WRU a tick (${fmtInt(ticksPerMonth)} ticks), ${a.rruPerRolloutRead * (1 + a.rolloutsRunning)} RRU a minute reading the running rollouts' gauges`,
    });
  }
  // Aurora: the activity flags, read by each scheduled probe, raised by the writers.
  const flagProbes = fns.filter((f) => f.activityTable !== null && isScheduled(f));
  const flagReads = flagProbes.reduce((n, f) => n + invocations[f.id]!.idle * FLAG_READ_UNITS, 0);
  if (!onDynamo && flagProbes.length) {
    line({
      what: 'DynamoDB on-demand requests (activity flags)',
      idle: flagReads * PRICES.dynamoRead.usd,
      busy: flagReads * PRICES.dynamoRead.usd + a.flagRaisesPerMonth * PRICES.dynamoWrite.usd,
      basis: `idle: ${fmtInt(flagReads)} RRU (${flagProbes.map((f) => f.label).join(' and ')} read their flag each invocation, ${FLAG_READ_UNITS} RRU), no write; busy: + ${fmtInt(a.flagRaisesPerMonth)} WRU of raises (at most one per writer sandbox every 5 minutes)`,
    });
  }
  const activityTables = new Set(fns.flatMap((f) => (f.activityTable ? [f.activityTable] : [])));
  const tables = ofType('AWS::DynamoDB::Table');
  count(
    'AWS::DynamoDB::Table',
    tables.map(([id]) => id),
  );
  for (const [id, r] of tables) {
    const p = props(r);
    if (activityTables.has(id)) {
      line({
        what: `DynamoDB storage (${id})`,
        idle: 0,
        busy: 0,
        basis: 'the activity flags: two items of a few bytes; the AWS owned key (no KMS request billed), no backups',
        freeTier: FREE_TIER.dynamo,
      });
      continue;
    }
    const pitr = (p.PointInTimeRecoverySpecification as { PointInTimeRecoveryEnabled?: boolean } | undefined)?.PointInTimeRecoveryEnabled === true;
    const perGb = PRICES.dynamoStorage.usd + (pitr ? PRICES.dynamoPitr.usd : 0);
    line({
      what: `DynamoDB storage${pitr ? ' + PITR' : ''} (${id})`,
      idle: a.tableGbIdle * perGb,
      busy: a.tableGbBusy * perGb,
      basis: `${a.tableGbIdle} GB idle, ${a.tableGbBusy} GB busy × US$ ${perGb.toFixed(2)}/GB-month`,
      freeTier: FREE_TIER.dynamo,
    });
    // SSEEnabled without a key: the AWS managed key (aws/dynamodb), whose requests KMS bills; the default (AWS owned key) costs nothing.
    const sse = p.SSESpecification as { SSEEnabled?: boolean; KMSMasterKeyId?: unknown } | undefined;
    if (sse?.SSEEnabled) {
      // Callers: the functions on this store that run in that column.
      const callers = (col: 'idle' | 'busy') => fns.filter((f) => f.store === 'dynamodb' && invocations[f.id]![col] > 0).length;
      const requests = (col: 'idle' | 'busy') => callers(col) * a.kmsRequestsPerCallerHour * monthHours;
      const cmk = sse.KMSMasterKeyId !== undefined ? 1 : 0; // a customer managed key is US$ 1 a month as well (not in this stack)
      line({
        what: `KMS requests of the table's ${cmk ? 'customer managed' : 'AWS managed'} key`,
        idle: requests('idle') * PRICES.kmsRequest.usd + cmk,
        busy: requests('busy') * PRICES.kmsRequest.usd + cmk,
        basis: `~${a.kmsRequestsPerCallerHour}/h per function using the table: ${callers('idle')} idle, ${callers('busy')} busy; an AWS owned key would cost nothing`,
        freeTier: FREE_TIER.kms,
      });
    }
  }

  // EventBridge: signals in, promotion events out, the archive; schedules and AWS service events are free.
  const promotionEvents = a.eventsPerMonth * a.promotionEventsPerSignal;
  const busEvents = a.eventsPerMonth + promotionEvents;
  line({
    what: 'EventBridge custom events',
    idle: 0,
    busy: busEvents * PRICES.eventBridgeCustomEvent.usd,
    basis: `busy: ${fmtInt(a.eventsPerMonth)} signals in + ${fmtInt(promotionEvents)} rollout events out; ${schedules.length} schedule(s) and ${busRules.length - busRules.filter(([, r]) => onCustomBus(r)).length} default-bus rule(s) on AWS events are free`,
  });
  const archives = ofType('AWS::Events::Archive');
  count(
    'AWS::Events::Archive',
    archives.map(([id]) => id),
  );
  for (const [id, r] of archives) {
    const gb = (busEvents * a.eventBytes) / 1e9;
    // Held steadily: a month's events times the months they are kept (kept forever: counted as one month, and growing).
    const days = num(props(r).RetentionDays, 0);
    const heldGb = gb * (days > 0 ? days / a.daysPerMonth : 1);
    line({
      what: `EventBridge archive (${id})`,
      idle: 0,
      busy: gb * PRICES.eventBridgeArchiveGb.usd + heldGb * PRICES.eventBridgeArchiveStorage.usd,
      basis: `busy: ${gb.toFixed(2)} GB archived a month, kept ${days > 0 ? `${days} days` : 'forever'}`,
    });
  }

  // SQS: an event source mapping long-polls its queue whether or not anything arrives; a schedule that drains one polls once an invocation.
  count(
    'AWS::Lambda::EventSourceMapping',
    mappings.map(([id]) => id),
  );
  const sqsMappings = mappings.filter(([, r]) => ofType('AWS::SQS::Queue').some(([q]) => str(props(r).EventSourceArn).includes(`"${q}"`)));
  if (sqsMappings.length < mappings.length) unpriced.add('AWS::Lambda::EventSourceMapping (not on a queue of this stack)');
  const longPolls = a.sqsPollers * (monthSeconds / a.sqsLongPollSeconds);
  if (sqsMappings.length) {
    const polls = sqsMappings.length * longPolls;
    line({
      what: `SQS: ${sqsMappings.length} event source mapping(s) polling`,
      idle: polls * PRICES.sqsRequest.usd,
      busy: polls * PRICES.sqsRequest.usd,
      basis: `${sqsMappings.length} × ${a.sqsPollers} pollers × one ${a.sqsLongPollSeconds} s long poll each = ${fmtInt(polls)} empty ReceiveMessage a month (Lambda guide: five pollers, as few as two when traffic is low)`,
      freeTier: FREE_TIER.sqs,
    });
  }
  const drainers = fns.filter((f) => isScheduled(f) && receives(f));
  if (drainers.length) {
    const polls = drainers.reduce((n, f) => n + invocations[f.id]!.idle, 0);
    line({
      what: `SQS: ${drainers.map((f) => f.label).join(', ')} polling the work DLQ on its schedule`,
      idle: polls * PRICES.sqsRequest.usd,
      busy: polls * PRICES.sqsRequest.usd,
      basis: `${fmtInt(polls)} short-poll ReceiveMessage a month, one an invocation (an event source mapping on the queue would make ${fmtInt(longPolls)} long polls: US$ ${(longPolls * PRICES.sqsRequest.usd).toFixed(2)}); the work queue's own requests are the runs' (see shards)`,
      freeTier: FREE_TIER.sqs,
    });
  }

  // CloudWatch alarms: per alarm metric; high resolution below a 60 s period.
  const alarms = ofType('AWS::CloudWatch::Alarm');
  count(
    'AWS::CloudWatch::Alarm',
    alarms.map(([id]) => id),
  );
  let alarmUsd = 0;
  let alarmMetrics = 0;
  let highRes = 0;
  for (const [, r] of alarms) {
    const p = props(r);
    const metrics = Array.isArray(p.Metrics)
      ? (p.Metrics as { MetricStat?: { Period?: number } }[]).filter((m) => m.MetricStat)
      : [{ MetricStat: { Period: num(p.Period, 60) } }];
    for (const m of metrics) {
      const fast = num(m.MetricStat?.Period, 60) < 60;
      highRes += fast ? 1 : 0;
      alarmMetrics++;
      alarmUsd += fast ? PRICES.alarmHighResolution.usd : PRICES.alarmStandard.usd;
    }
  }
  line({
    what: `CloudWatch alarms (${alarms.length})`,
    idle: alarmUsd,
    busy: alarmUsd,
    basis: `${alarms.length} alarm(s) reading ${alarmMetrics} metric(s) (a metric-math alarm is billed for each metric it reads), ${highRes} high-resolution, US$ ${PRICES.alarmStandard.usd.toFixed(2)} per standard alarm metric`,
    freeTier: FREE_TIER.alarms,
  });

  // Custom metrics (EMF): none while idle; the busy ones every hour, and each running rollout's gauges (dimension `rollout`).
  const services = fns.filter((f) => f.role).map((f) => kebab(f.role!));
  const busyMetrics = services.flatMap((s) => (METRICS_BY_SERVICE[s]?.busy ?? []).map((m) => `${s}/${m}`));
  const possible =
    services.reduce((n, s) => n + (METRICS_BY_SERVICE[s]?.busy.length ?? 0) + (METRICS_BY_SERVICE[s]?.onEvent.length ?? 0), 0) + STACK_METRICS.length;
  const perRollout = rolloutGauges(a.gates);
  const gauges = gaugeReads ? a.rolloutsRunning * perRollout.metrics : 0;
  const judged = gatesCost(a.gates, a);
  line({
    what: 'CloudWatch custom metrics (Rollout namespace)',
    idle: 0,
    busy: (busyMetrics.length + gauges) * PRICES.customMetric.usd,
    basis: `idle: none (an invocation that counted nothing publishes nothing); busy: ${busyMetrics.length} with data every hour (${busyMetrics.join(', ')}), and ${gauges} rollout gauges (${a.rolloutsRunning} rollout(s) running, each with ${perRollout.metrics - judged.gaugeMetrics} of its own and ${judged.gaugeMetrics} for its ${a.gates.length} provider gate(s): a metric per dimension combination while it runs; a judged gate adds its verdicts, a mann-whitney one its interval); ${possible} possible counts, the others only when what they count happens (all ${possible} every hour: US$ ${(possible * PRICES.customMetric.usd).toFixed(2)}), and rollout_events_total per event type the same way`,
    freeTier: FREE_TIER.metrics,
  });

  const dashboards = ofType('AWS::CloudWatch::Dashboard');
  count(
    'AWS::CloudWatch::Dashboard',
    dashboards.map(([id]) => id),
  );
  if (dashboards.length)
    line({
      what: `CloudWatch dashboard (${dashboards.length})`,
      idle: dashboards.length * PRICES.dashboard.usd,
      busy: dashboards.length * PRICES.dashboard.usd,
      basis: `${dashboards.length} × US$ ${PRICES.dashboard.usd} a month (opt-in: -c dashboard=true)`,
      freeTier: FREE_TIER.dashboard,
    });

  // Logs: every invocation's platform lines; a busy one's own line and EMF blob; access logs; flow and database logs (Aurora).
  const perInvocation = a.platformLogBytes + a.platformLogEvents * 26;
  const invocationLogs = (col: 'idle' | 'busy') =>
    fns.reduce(
      (n, f) =>
        n + invocations[f.id]![col] * (perInvocation + (col === 'busy' && (signalTargets.has(f.id) || apiTargets.has(f.id)) ? a.appLogBytesBusy + 2 * 26 : 0)),
      0,
    );
  const gaugeBlobs = a.rolloutsRunning * rolloutGauges(a.gates).blobs;
  const batchBusyLogs = fns
    .filter((f) => f.role === 'batchPromoter')
    .reduce((n, f) => n + invocations[f.id]!.busy * (a.appLogBytesBusy + 2 * 26 + gaugeBlobs * (a.figureBlobBytes + 26)), 0);
  const accessLogs = apiTargets.size ? a.apiRequestsPerMonth * (a.accessLogBytes + 26) : 0;
  const logGb = { idle: invocationLogs('idle') / 1e9, busy: (invocationLogs('busy') + batchBusyLogs + accessLogs) / 1e9 };
  const logUsd = (gb: number) => gb * PRICES.logsIngest.usd + gb * a.logCompression * PRICES.logsStorage.usd;
  line({
    what: `CloudWatch Logs (${ofType('AWS::Logs::LogGroup').length} log groups)`,
    idle: logUsd(logGb.idle),
    busy: logUsd(logGb.busy),
    basis: `idle ${logGb.idle.toFixed(3)} GB, busy ${logGb.busy.toFixed(3)} GB ingested a month (START/END/REPORT of every invocation; busy adds each one's log line and EMF blob, the rollout gauges' blobs, and access logs); kept one month`,
    freeTier: FREE_TIER.logs,
  });

  // Gate reads: each running rollout's gates, on the BatchPromoter's ticks (tools/cost/gates.ts); a judged gate reads both cohorts.
  if (fns.some((f) => f.role === 'batchPromoter')) {
    const n = a.rolloutsRunning;
    const gates = a.gates.map(describeGate).join('; ') || 'none';
    line({
      what: 'CloudWatch GetMetricData / DescribeAlarms (gates)',
      idle: 0,
      busy: n * (judged.metrics * PRICES.getMetricData.usd + judged.describeAlarms * PRICES.cloudWatchApiRequest.usd),
      basis: `busy: ${n} rollout(s) × ${a.gates.length} gate(s) (${gates}): ${fmtInt(n * judged.metrics)} metrics requested (billed per metric: a threshold gate asks 1 a read, a judged one 2, 4 with sequential-rate), ${fmtInt(n * judged.describeAlarms)} DescribeAlarms; an alarm gate read every 10 s tick would be ${fmtInt(6 * monthMinutes)} requests (US$ ${(6 * monthMinutes * PRICES.cloudWatchApiRequest.usd).toFixed(2)})`,
      freeTier: FREE_TIER.cloudwatchApi,
    });
    if (judged.promQueries > 0)
      line({
        what: 'Amazon Managed Service for Prometheus queries (gates)',
        idle: 0,
        busy: n * judged.ampSamples * PRICES.ampQuerySample.usd,
        basis: `busy: ${fmtInt(n * judged.promQueries)} PromQL queries (a judged gate makes 2 range queries a read, 4 with sequential-rate), ${fmtInt(n * judged.ampSamples)} samples processed on AMP workspaces (${a.promSamplesPerPoint} a point answered); a Prometheus of your own bills nothing here`,
      });
  }

  const apis = ofType('AWS::ApiGatewayV2::Api');
  if (apis.length)
    line({
      what: 'HTTP API requests',
      idle: 0,
      busy: a.apiRequestsPerMonth * PRICES.httpApiRequest.usd,
      basis: `busy: ${fmtInt(a.apiRequestsPerMonth)} requests; US$ 1 per million`,
    });

  // Aurora Serverless v2 and its VPC.
  if (aurora) {
    const clusters = ofType('AWS::RDS::DBCluster');
    count(
      'AWS::RDS::DBCluster',
      clusters.map(([id]) => id),
    );
    const instances = ofType('AWS::RDS::DBInstance');
    count(
      'AWS::RDS::DBInstance',
      instances.map(([id]) => id),
    );
    const rotations = ofType('AWS::SecretsManager::RotationSchedule').length;
    // Scheduled functions on the database without an activity flag read it every invocation: the cluster never pauses.
    const wakers = fns.filter((f) => f.store === 'postgres' && isScheduled(f) && f.activityTable === null);
    const wakes = a.auroraSweepsPerMonth + rotations;
    for (const [cid, c] of clusters) {
      const scaling = props(c).ServerlessV2ScalingConfiguration as { MinCapacity?: number; MaxCapacity?: number; SecondsUntilAutoPause?: number } | undefined;
      const min = num(scaling?.MinCapacity, 0.5);
      const mine = instances.filter(([, r]) => mentions(r, cid));
      const serverless = mine.filter(([, r]) => props(r).DBInstanceClass === 'db.serverless');
      if (serverless.length < mine.length) unpriced.add('AWS::RDS::DBInstance (provisioned class: only db.serverless is priced)');
      const acuUsd = (acu: number, hours = monthHours) => serverless.length * acu * hours * PRICES.auroraAcuHour.usd;
      const floor = min > 0 ? min : a.auroraAwakeMinAcu;
      const busyAcu = Math.max(floor, a.auroraBusyAcu);
      const pauseMinutes = num(scaling?.SecondsUntilAutoPause, 300) / 60;
      const wakeHours = (wakes * (a.auroraWakeWorkMinutes + pauseMinutes)) / 60;
      const idleHours = min > 0 || wakers.length ? monthHours : wakeHours;
      const idleBasis =
        min > 0
          ? `${serverless.length} × ${min} ACU × ${monthHours} h idle (the minimum runs whether or not anything happens)`
          : wakers.length
            ? `0 ACU minimum, but ${wakers.map((f) => f.label).join(' and ')} read the database every minute: it never pauses (${serverless.length} × ${floor} ACU × ${monthHours} h)`
            : `paused (0 ACU) but for ${wakes} wakes a month (the probes' daily sweep, the secret's rotation), each ~${a.auroraWakeWorkMinutes} min of work and ${pauseMinutes} min until it pauses again, at ${floor} ACU: ${wakeHours.toFixed(1)} h`;
      line({
        what: `Aurora Serverless v2: ${serverless.length} instance(s), min ${min} ACU`,
        idle: acuUsd(floor, idleHours),
        busy: acuUsd(busyAcu),
        basis: `${idleBasis}; busy ${busyAcu} ACU each, awake all month (a reader that scales with the writer follows it)`,
      });
      const ios = a.eventsPerMonth * a.auroraIosPerSignal;
      line({
        what: 'Aurora storage and I/O',
        idle: a.auroraStorageGb * PRICES.auroraStorage.usd,
        busy: a.auroraStorageGb * PRICES.auroraStorage.usd + ios * PRICES.auroraIo.usd,
        basis: `${a.auroraStorageGb} GB; busy ${fmtInt(ios)} I/O (${a.auroraIosPerSignal} a signal); backups up to the cluster's size are not charged`,
      });
    }
    const secrets = ofType('AWS::SecretsManager::Secret');
    count(
      'AWS::SecretsManager::Secret',
      secrets.map(([id]) => id),
    );
    // Each invocation that uses the database opens a connection (pools end with the invocation), which re-reads the secret once it is 30 s old.
    const opens = (f: FnInfo, col: 'idle' | 'busy') => {
      if (f.store !== 'postgres') return 0;
      if (isScheduled(f) && f.activityTable !== null) return col === 'busy' && f.role === 'batchPromoter' ? invocations[f.id]!.busy : a.auroraSweepsPerMonth;
      return invocations[f.id]![col];
    };
    const fetches = (col: 'idle' | 'busy') => fns.reduce((n, f) => n + Math.min(opens(f, col), a.secretReadsPerFunctionMinute * monthMinutes), 0);
    const secretUsd = (col: 'idle' | 'busy') => secrets.length * PRICES.secret.usd + fetches(col) * PRICES.secretApiCall.usd;
    if (secrets.length)
      line({
        what: `Secrets Manager (${secrets.length} secret)`,
        idle: secretUsd('idle'),
        busy: secretUsd('busy'),
        basis: `${secrets.length} × US$ ${PRICES.secret.usd}; GetSecretValue when an invocation opens a connection and the secret it holds is 30 s old (at most ${a.secretReadsPerFunctionMinute} a minute a function): ${fmtInt(fetches('idle'))} idle, ${fmtInt(fetches('busy'))} busy; rotated monthly by its rotation function (${rotations} schedule)`,
      });
  }
  const nats = ofType('AWS::EC2::NatGateway');
  count(
    'AWS::EC2::NatGateway',
    nats.map(([id]) => id),
  );
  if (nats.length) {
    const gbBusy = (a.eventsPerMonth * a.natBytesPerSignal) / 1e9;
    const azs = Math.max(1, ofType('AWS::EC2::Subnet').filter(([, r]) => props(r).MapPublicIpOnLaunch === true).length);
    const endpointsUsd = ENDPOINT_SERVICES.length * azs * monthHours * PRICES.interfaceEndpointHour.usd;
    line({
      what: `NAT gateway (${nats.length})`,
      idle: nats.length * monthHours * PRICES.natGatewayHour.usd,
      busy: nats.length * monthHours * PRICES.natGatewayHour.usd + gbBusy * PRICES.natGatewayGb.usd,
      basis: `${nats.length} × ${monthHours} h × US$ ${PRICES.natGatewayHour.usd}; busy + ${gbBusy.toFixed(1)} GB processed. The functions in the VPC reach ${ENDPOINT_SERVICES.join(', ')}, X-Ray, gate origins and targets through it; interface endpoints for those ${ENDPOINT_SERVICES.length} services in ${azs} AZs instead would be US$ ${endpointsUsd.toFixed(2)} a month, and leave origins and targets outside AWS unreachable`,
    });
  }
  const eips = ofType('AWS::EC2::EIP');
  count(
    'AWS::EC2::EIP',
    eips.map(([id]) => id),
  );
  if (eips.length)
    line({
      what: `public IPv4 (${eips.length} EIP)`,
      idle: eips.length * monthHours * PRICES.publicIpv4Hour.usd,
      busy: eips.length * monthHours * PRICES.publicIpv4Hour.usd,
      basis: `${eips.length} × ${monthHours} h × US$ ${PRICES.publicIpv4Hour.usd}`,
    });
  const endpoints = ofType('AWS::EC2::VPCEndpoint');
  count(
    'AWS::EC2::VPCEndpoint',
    endpoints.map(([id]) => id),
  );
  const interfaceAzs = endpoints
    .filter(([, r]) => props(r).VpcEndpointType === 'Interface')
    .reduce((n, [, r]) => n + Math.max(1, (props(r).SubnetIds as unknown[] | undefined)?.length ?? 1), 0);
  if (endpoints.length)
    line({
      what: `VPC endpoints (${endpoints.length})`,
      idle: interfaceAzs * monthHours * PRICES.interfaceEndpointHour.usd,
      busy: interfaceAzs * monthHours * PRICES.interfaceEndpointHour.usd,
      basis: `${interfaceAzs} interface endpoint-AZ(s) × ${monthHours} h; gateway endpoints are free`,
    });
  const flowLogs = ofType('AWS::EC2::FlowLog');
  if (flowLogs.length || aurora) {
    const gb = flowLogs.length * a.flowLogGbPerMonth + (aurora ? a.dbLogGbPerMonth : 0);
    line({
      what: 'VPC flow logs and database logs',
      idle: logUsd(gb),
      busy: logUsd(gb),
      basis: `~${gb.toFixed(2)} GB a month (rejected traffic only; PostgreSQL's own log)`,
    });
  }

  // Whatever else the template holds must be known to be free, or it is reported.
  const priced = new Set([
    'AWS::Lambda::Function',
    'AWS::Events::Rule',
    'AWS::Events::Archive',
    'AWS::Lambda::EventSourceMapping',
    'AWS::CloudWatch::Alarm',
    'AWS::CloudWatch::Dashboard',
    'AWS::DynamoDB::Table',
    'AWS::RDS::DBCluster',
    'AWS::RDS::DBInstance',
    'AWS::SecretsManager::Secret',
    'AWS::EC2::NatGateway',
    'AWS::EC2::EIP',
    'AWS::EC2::VPCEndpoint',
  ]);
  for (const [, r] of resources) if (!priced.has(r.Type) && !(r.Type in NO_CHARGE_OF_THEIR_OWN)) unpriced.add(r.Type);

  const total = (col: 'idle' | 'busy') => lines.reduce((n, l) => n + l[col], 0);
  return { store, lines, idle: total('idle'), busy: total('busy'), counted, schedules, invocations, unpriced: [...unpriced].sort(), assumptions: a };
}
