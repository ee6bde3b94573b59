import { Duration, Stack } from 'aws-cdk-lib';
import type { HttpStage } from 'aws-cdk-lib/aws-apigatewayv2';
import {
  Alarm,
  AlarmStatusWidget,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  MathExpression,
  Metric,
  SingleValueWidget,
  TextWidget,
  TreatMissingData,
  type IMetric,
} from 'aws-cdk-lib/aws-cloudwatch';
import type { Function as LambdaFunctionResource } from 'aws-cdk-lib/aws-lambda';
import type { Queue } from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { MAX_ROLLOUTS, METRICS_NAMESPACE } from '../shared/api/metrics.js';

/** What the alarms and the dashboard read. */
export interface AlarmSources {
  /** The HTTP API's stage (its 5xx answers are an alarm's); none without an API. */
  readonly apiStage: HttpStage | undefined;
  readonly eventsDlq: Queue;
  readonly workQueue: Queue;
  readonly workDlq: Queue;
  readonly functions: Readonly<Record<string, LambdaFunctionResource>>;
}

/**
 * The alarms, one per concern, each for something a person must act on
 * (docs/operating/observability.md#operating says what to do); and the opt-in dashboard. An alarm
 * is billed per metric it reads, so where two would read the same failure
 * one does: a function invoked by a rule or a schedule that keeps failing
 * lands in the events DLQ once its retries are used up (EventsDlqNotEmpty),
 * the API's failures are API Gateway's 5xx answers (ApiErrors); a dead
 * letter settled and one left unsettled are both messages received from
 * the work DLQ (WorkDeadLetters); a rollout past its deadline and one
 * drifted are both rollouts that need a person (RolloutNeedsAttention).
 */
export function controlPlaneAlarms(scope: Construct, o: AlarmSources, dashboard: boolean): Alarm[] {
  const fiveMinutes = Duration.minutes(5);
  const custom = (metricName: string, statistic: string, dimensionsMap: Record<string, string> = {}, period = fiveMinutes) =>
    new Metric({ namespace: METRICS_NAMESPACE, metricName, statistic, period, dimensionsMap });
  const alarm = (id: string, alarmDescription: string, metric: IMetric, opts: { threshold?: number; evaluationPeriods?: number } = {}) =>
    new Alarm(scope, id, {
      alarmDescription,
      metric,
      threshold: opts.threshold ?? 0,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: opts.evaluationPeriods ?? 1,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
  const alarms = [
    ...(o.apiStage
      ? [
          alarm(
            'ApiErrors',
            'The API answered 5xx: the api function failed, timed out or ran out of memory, or answered 500 itself. Its log group says why (Logs Insights `filter level = "error"`; a 500 carries the requestId of its line). On Aurora, a request that finds the cluster paused waits for it to resume (about 15 s, longer after a day) and may time out once. The other functions\' failures page through EventsDlqNotEmpty once their retries are used up.',
            o.apiStage.metricServerError({ period: fiveMinutes, statistic: 'Sum' }),
          ),
        ]
      : []),
    alarm(
      'EventsDlqNotEmpty',
      'An event was given up: a rule could not deliver it, or its function failed it three times (a malformed signal, a store that kept failing, a batch promoter or coordinator scan that kept failing, a Spot notice). Each message carries its error (ErrorMessage attribute), and the function\'s log group the failures (Logs Insights `filter level = "error"`). Fix the sender or the cause, then redrive the queue to the bus or delete the messages.',
      o.eventsDlq.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1) }),
    ),
    alarm(
      'WorkDeadLetters',
      "Work items' messages reached the work DLQ: they were given back maxReceiveCount times (they kept killing or failing their workers). The coordinator's scan marks each item Failed within a minute: `rollout runs items RUN --state failed` shows why; fix the handler or the input, then create a run of those items again. If the alarm stays in ALARM, some cannot be settled: the coordinator's log says why (another stack coordinates the run, or the store fails).",
      // Every letter is received at least once by the scan, settled or not; one left unsettled is received again every few minutes.
      o.workDlq.metricNumberOfMessagesReceived({ period: fiveMinutes, statistic: 'Sum' }),
    ),
    alarm(
      'WorkQueueAge',
      "Work waits more than 15 minutes: too few workers, or none. Check the worker fleet (its Auto Scaling group and the workers' logs) and `rollout runs get RUN`.",
      o.workQueue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(1) }),
      { threshold: 900, evaluationPeriods: 3 },
    ),
    alarm(
      'RunThrottled',
      'A work run is throttled by DynamoDB (a hot key): it runs slower than it could. `rollout runs status RUN` names the key family; create such runs with more shards (itemsPerSecond).',
      custom('RunsThrottled', 'Maximum', { service: 'coordinator' }),
      { evaluationPeriods: 2 },
    ),
    alarm(
      'LeaseLost',
      'Leases keep changing hands: more than 3 times in 15 minutes a promoter could not renew promotion_leader or a coordinator was fenced mid-request (LeasesLost; by function: LeaseRenewalFailures, Fenced). Fencing kept every write safe, but promotions and coordination stall at each change. Another stack sharing the store, or a store that is slow or failing: look at its latency and throttling, and at which stacks share it.',
      custom('LeasesLost', 'Sum', {}, Duration.minutes(15)),
      { threshold: 3 },
    ),
    alarm(
      'RolloutNeedsAttention',
      'A running rollout needs a person (RolloutsNeedingAttention): it made no progress for its progressDeadlineSeconds (ai.rollout.progress_deadline_exceeded; aborted if progressDeadlineAbort), or a target it moves was changed outside the control plane (ai.rollout.actuation_drift; the rollout is paused). `rollout rollouts history ID` says which. Past its deadline: read its gates (`rollout rollouts get ID`), a gate that never passes or a stage waiting on a manual promote; promote, abort, or fix the signal. Drifted: put the target back and resume, or abort.',
      custom('RolloutsNeedingAttention', 'Sum'),
    ),
  ];
  if (dashboard) controlPlaneDashboard(scope, o, alarms);
  return alarms;
}

/**
 * The figures of infra/observability/grafana-dashboard.json, from the EMF
 * the functions publish under the same names. Per-rollout series are known
 * only at run time: SEARCH finds them (`{Rollout,rollout}` is the namespace
 * and the exact dimension set).
 */
function controlPlaneDashboard(scope: Construct, o: AlarmSources, alarms: readonly Alarm[]): void {
  const search = (schema: string, metricName: string, statistic: string, label: string, period = Duration.minutes(1)) =>
    new MathExpression({
      expression: `SEARCH('{${METRICS_NAMESPACE},${schema}} MetricName="${metricName}"', '${statistic}', ${period.toSeconds()})`,
      usingMetrics: {},
      label,
      period,
    });
  const metric = (metricName: string, statistic: string, label: string, dimensionsMap: Record<string, string> = {}, period = Duration.minutes(1)) =>
    new Metric({ namespace: METRICS_NAMESPACE, metricName, statistic, period, dimensionsMap, label });
  const rollout = "${PROP('Dim.rollout')}";
  const gate = `${rollout} ${"${PROP('Dim.gate')}"}`;
  const hour = Duration.hours(1);
  new Dashboard(scope, 'Dashboard', { dashboardName: `${Stack.of(scope).stackName}-control-plane` }).addWidgets(
    new TextWidget({
      markdown: `**Rollouts** (one point a minute per running rollout, from the BatchPromoter while this stack leads; at most ${MAX_ROLLOUTS}) and **work runs**. The same figures as infra/observability/grafana-dashboard.json, under the same metric names.`,
      width: 24,
      height: 2,
    }),
    new SingleValueWidget({
      title: 'Rollouts in flight',
      metrics: [
        new MathExpression({
          expression: `SUM(SEARCH('{${METRICS_NAMESPACE},rollout} MetricName="rollout_info"', 'Maximum', 60))`,
          usingMetrics: {},
          label: 'running',
          period: Duration.minutes(1),
        }),
        metric('rollout_metrics_left_out', 'Maximum', 'past the cap', { kind: 'rollouts' }),
      ],
      width: 8,
    }),
    new SingleValueWidget({
      title: 'Dead letters (1 h)',
      metrics: [metric('rollout_dead_letters_total', 'Sum', 'items failed as dead letters', {}, hour)],
      width: 8,
    }),
    new AlarmStatusWidget({ title: 'Alarms', alarms: [...alarms], width: 8 }),
    new GraphWidget({
      title: 'Percent on the new version',
      left: [search('rollout', 'rollout_percent', 'Maximum', rollout)],
      leftYAxis: { min: 0, max: 100 },
      width: 12,
    }),
    new GraphWidget({ title: 'Active stage', left: [search('rollout', 'rollout_stage_index', 'Maximum', rollout)], leftYAxis: { min: 0 }, width: 12 }),
    new GraphWidget({
      title: 'Gate values against thresholds',
      left: [
        search('gate,rollout', 'rollout_gate_value', 'Maximum', `${gate} value`),
        search('gate,rollout', 'rollout_gate_threshold', 'Maximum', `${gate} threshold`),
      ],
      width: 12,
    }),
    new GraphWidget({
      title: 'Gate readings in the current period',
      left: [search('gate,outcome,rollout', 'rollout_gate_readings', 'Maximum', `${gate} ${"${PROP('Dim.outcome')}"}`)],
      width: 12,
    }),
    new GraphWidget({
      title: 'Time in stage against the progress deadline (s)',
      left: [
        search('rollout', 'rollout_stage_seconds', 'Maximum', `${rollout} in stage`),
        search('rollout', 'rollout_progress_deadline_seconds', 'Maximum', `${rollout} deadline`),
      ],
      width: 12,
    }),
    new GraphWidget({
      title: 'Transitions (per 5 min)',
      left: [search('type', 'rollout_events_total', 'Sum', "${PROP('Dim.type')}", Duration.minutes(5))],
      width: 12,
    }),
    // Item counts by state are the node's (a count reads every open item's index entry: too dear once a minute on DynamoDB); here the queue says it.
    new GraphWidget({
      title: 'Run progress',
      left: [
        o.workQueue.metricApproximateNumberOfMessagesVisible({ label: 'pending (messages waiting)', period: Duration.minutes(1) }),
        o.workQueue.metricApproximateNumberOfMessagesNotVisible({ label: 'running (messages held)', period: Duration.minutes(1) }),
        o.workDlq.metricApproximateNumberOfMessagesVisible({ label: 'dead letters waiting', period: Duration.minutes(1) }),
      ],
      right: [search('run', 'rollout_run_steals', 'Sum', `${"${PROP('Dim.run')}"} stolen`, Duration.minutes(5))],
      width: 12,
    }),
    new GraphWidget({
      title: 'Throughput (items a minute)',
      left: [o.workQueue.metricNumberOfMessagesDeleted({ label: 'items ended (messages deleted)', period: Duration.minutes(1), statistic: 'Sum' })],
      right: [
        metric('ItemsRepended', 'Sum', 're-pended', { service: 'coordinator' }),
        metric('ItemsFailed', 'Sum', 'failed by the coordinator', { service: 'coordinator' }),
      ],
      width: 12,
    }),
    new GraphWidget({ title: 'Invocations', left: Object.values(o.functions).map((f) => f.metricInvocations()), width: 12 }),
    new GraphWidget({ title: 'Errors', left: Object.values(o.functions).map((f) => f.metricErrors()), width: 12 }),
    new GraphWidget({
      title: 'Work queue',
      left: [o.workQueue.metricApproximateNumberOfMessagesVisible(), o.workDlq.metricApproximateNumberOfMessagesVisible()],
      right: [o.workQueue.metricApproximateAgeOfOldestMessage()],
      width: 12,
    }),
  );
}
