/**
 * The tests' CloudWatch stand-in (test/support/cloudwatch/server.ts), through the unmodified SDK
 * client: what the stand-in answers must be what a caller of the real service can read, typed
 * exceptions included. Times are fixed dates, never the clock.
 */
import {
  CloudWatchClient,
  CloudWatchServiceException,
  DescribeAlarmsCommand,
  GetMetricDataCommand,
  InternalServiceFault,
  ValidationException,
  type MetricDataQuery,
} from '@aws-sdk/client-cloudwatch';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CloudWatchStandIn } from '../support/cloudwatch/server.js';

const T0 = new Date('2025-03-01T12:00:00Z');
const at = (seconds: number): Date => new Date(T0.getTime() + seconds * 1000);
const NS = 'Rollout/Test';
const dims = { Service: 'checkout' };
const metric = (metricName: string, Period = 60, Stat = 'Sum'): MetricDataQuery['MetricStat'] => ({
  Metric: { Namespace: NS, MetricName: metricName, Dimensions: [{ Name: 'Service', Value: 'checkout' }] },
  Period,
  Stat,
});

describe('CloudWatch stand-in through the SDK', () => {
  let cw: CloudWatchStandIn;
  let client: CloudWatchClient;
  let once: CloudWatchClient; // a single attempt: errors surface unretried

  beforeAll(async () => {
    cw = await new CloudWatchStandIn({ region: 'us-east-1', account: '123456789012' }).start();
    const config = { region: 'us-east-1', endpoint: cw.url, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } };
    client = new CloudWatchClient(config);
    once = new CloudWatchClient({ ...config, maxAttempts: 1 });
  });
  afterAll(async () => {
    client?.destroy();
    once?.destroy();
    await cw?.stop();
  });
  beforeEach(() => cw.reset());

  describe('DescribeAlarms', () => {
    it('returns the alarms asked for, with their state; a composite only when CompositeAlarm is asked for', async () => {
      cw.setAlarm('checkout-5xx', 'ALARM', { reason: 'Threshold Crossed: 1 datapoint [12.0] was greater than the threshold (5.0).', at: at(0) });
      cw.setAlarm('checkout-latency', 'OK', { at: at(30) });
      cw.setAlarm('checkout-health', 'ALARM', { type: 'CompositeAlarm', rule: 'ALARM(checkout-5xx) OR ALARM(checkout-latency)', at: at(60) });
      const names = ['checkout-5xx', 'checkout-latency', 'checkout-health', 'no-such-alarm'];

      const metricOnly = await client.send(new DescribeAlarmsCommand({ AlarmNames: names }));
      expect(metricOnly.MetricAlarms!.map((a) => a.AlarmName)).toEqual(['checkout-5xx', 'checkout-latency']);
      expect(metricOnly.CompositeAlarms ?? []).toEqual([]);
      const fiveXx = metricOnly.MetricAlarms![0]!;
      expect(fiveXx).toMatchObject({
        AlarmArn: 'arn:aws:cloudwatch:us-east-1:123456789012:alarm:checkout-5xx',
        StateValue: 'ALARM',
        StateReason: 'Threshold Crossed: 1 datapoint [12.0] was greater than the threshold (5.0).',
      });
      // Timestamps cross the wire as epoch seconds and come back as Dates.
      expect(fiveXx.StateUpdatedTimestamp).toEqual(at(0));

      const both = await client.send(new DescribeAlarmsCommand({ AlarmNames: names, AlarmTypes: ['MetricAlarm', 'CompositeAlarm'] }));
      expect(both.MetricAlarms).toHaveLength(2);
      expect(both.CompositeAlarms).toEqual([
        expect.objectContaining({
          AlarmName: 'checkout-health',
          AlarmArn: 'arn:aws:cloudwatch:us-east-1:123456789012:alarm:checkout-health',
          AlarmRule: 'ALARM(checkout-5xx) OR ALARM(checkout-latency)',
          StateValue: 'ALARM',
          StateUpdatedTimestamp: at(60),
          StateTransitionedTimestamp: at(60),
        }),
      ]);

      const alarming = await client.send(new DescribeAlarmsCommand({ AlarmNames: names, StateValue: 'ALARM', AlarmTypes: ['MetricAlarm', 'CompositeAlarm'] }));
      expect([...alarming.MetricAlarms!, ...alarming.CompositeAlarms!].map((a) => a.AlarmName)).toEqual(['checkout-5xx', 'checkout-health']);
      expect(cw.calls.map((c) => c.operation)).toEqual(['DescribeAlarms', 'DescribeAlarms', 'DescribeAlarms']);
      expect(cw.calls[0]!.input).toMatchObject({ AlarmNames: names });
    });

    it('keeps StateTransitionedTimestamp while the state stays the same', async () => {
      cw.setAlarm('flappy', 'ALARM', { at: at(0) });
      cw.setAlarm('flappy', 'ALARM', { at: at(60), reason: 'still high' });
      const [alarm] = (await client.send(new DescribeAlarmsCommand({ AlarmNames: ['flappy'] }))).MetricAlarms!;
      expect(alarm).toMatchObject({ StateReason: 'still high', StateUpdatedTimestamp: at(60), StateTransitionedTimestamp: at(0) });
    });

    it('pages with MaxRecords and NextToken', async () => {
      const names = Array.from({ length: 7 }, (_, i) => `page-${String(i).padStart(2, '0')}`);
      for (const n of names) cw.setAlarm(n, 'OK');
      const seen: string[] = [];
      let NextToken: string | undefined;
      let pages = 0;
      do {
        const page = await client.send(new DescribeAlarmsCommand({ AlarmNamePrefix: 'page-', MaxRecords: 3, NextToken }));
        seen.push(...page.MetricAlarms!.map((a) => a.AlarmName!));
        NextToken = page.NextToken;
        pages++;
      } while (NextToken);
      expect(seen).toEqual(names);
      expect(pages).toBe(3);
    });

    it('takes 100 names in one call and refuses 101 with a ValidationError the SDK types', async () => {
      const hundred = Array.from({ length: 100 }, (_, i) => `alarm-${i}`);
      cw.setAlarm('alarm-42', 'ALARM');
      const ok = await once.send(new DescribeAlarmsCommand({ AlarmNames: hundred }));
      expect(ok.MetricAlarms!.map((a) => a.AlarmName)).toEqual(['alarm-42']);
      expect((cw.calls[0]!.input as { AlarmNames: string[] }).AlarmNames).toHaveLength(100);

      const err = await once.send(new DescribeAlarmsCommand({ AlarmNames: [...hundred, 'alarm-100'] })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationException);
      expect(err).toMatchObject({ name: 'ValidationException', Code: 'ValidationError', $fault: 'client', $metadata: { httpStatusCode: 400 } });
      expect((err as Error).message).toContain('Member must have length less than or equal to 100');
    });
  });

  describe('GetMetricData', () => {
    beforeEach(() => {
      // Minute 0: 3 requests, 1 error; minute 1: 2 requests, no error datapoint; minute 2: nothing.
      for (const [s, v] of [
        [1, 100],
        [20, 200],
        [59, 300],
        [61, 50],
        [119, 150],
      ] as const)
        cw.putDatapoint({ namespace: NS, metricName: 'Requests', dimensions: dims }, at(s), v);
      cw.putDatapoint({ namespace: NS, metricName: 'Errors', dimensions: dims }, at(5), 30);
      // The same metric with other dimensions is another metric.
      cw.putDatapoint({ namespace: NS, metricName: 'Requests', dimensions: { ...dims, Stage: 'canary' } }, at(2), 1_000_000);
    });

    it('aggregates Sum and Average per period, newest first', async () => {
      const out = await client.send(
        new GetMetricDataCommand({
          StartTime: T0,
          EndTime: at(180),
          MetricDataQueries: [
            { Id: 'sum', MetricStat: metric('Requests', 60, 'Sum') },
            { Id: 'avg', MetricStat: metric('Requests', 60, 'Average'), Label: 'mean requests' },
            { Id: 'whole', MetricStat: metric('Requests', 180, 'Sum') },
            { Id: 'p50', MetricStat: metric('Requests', 60, 'p50') },
            { Id: 'count', MetricStat: metric('Requests', 60, 'SampleCount') },
          ],
        }),
      );
      const [sum, avg, whole, p50, count] = out.MetricDataResults!;
      expect(sum).toEqual({ Id: 'sum', Label: 'Requests', Timestamps: [at(60), at(0)], Values: [200, 600], StatusCode: 'Complete', Messages: [] });
      expect(avg).toMatchObject({ Id: 'avg', Label: 'mean requests', Timestamps: [at(60), at(0)], Values: [100, 200] });
      expect(whole).toMatchObject({ Timestamps: [at(0)], Values: [800] });
      expect(p50).toMatchObject({ Values: [50, 200] });
      expect(count).toMatchObject({ Values: [2, 3] });
    });

    it('evaluates errors / requests, dropping what would divide by zero, and returns only ReturnData queries', async () => {
      const out = await client.send(
        new GetMetricDataCommand({
          StartTime: T0,
          EndTime: at(180),
          ScanBy: 'TimestampAscending',
          MetricDataQueries: [
            { Id: 'errors', MetricStat: metric('Errors'), ReturnData: false },
            { Id: 'requests', MetricStat: metric('Requests'), ReturnData: false },
            { Id: 'rate', Expression: 'errors / requests', Label: 'error rate' },
            { Id: 'pct', Expression: '100 * (errors / requests)' },
            { Id: 'inverse', Expression: 'requests / errors' },
          ],
        }),
      );
      expect(out.MetricDataResults!.map((r) => r.Id)).toEqual(['rate', 'pct', 'inverse']);
      const [rate, pct, inverse] = out.MetricDataResults!;
      // A value missing from one series counts as 0 (minute 1 has requests, no errors).
      expect(rate).toMatchObject({ Label: 'error rate', Timestamps: [at(0), at(60)], Values: [0.05, 0], StatusCode: 'Complete' });
      expect(pct).toMatchObject({ Label: 'pct', Values: [5, 0] });
      // Minute 1 divides by zero errors: dropped, as CloudWatch drops it.
      expect(inverse).toMatchObject({ Timestamps: [at(0)], Values: [20] });
    });

    it('answers a metric without datapoints with an empty result', async () => {
      const out = await client.send(
        new GetMetricDataCommand({ StartTime: T0, EndTime: at(180), MetricDataQueries: [{ Id: 'none', MetricStat: metric('Latency', 60, 'p99') }] }),
      );
      expect(out.MetricDataResults).toEqual([{ Id: 'none', Label: 'Latency', Timestamps: [], Values: [], StatusCode: 'Complete', Messages: [] }]);
    });

    it('refuses bad ids, too many queries and unsupported functions with a typed ValidationError', async () => {
      const send = (MetricDataQueries: MetricDataQuery[]) =>
        once.send(new GetMetricDataCommand({ StartTime: T0, EndTime: at(180), MetricDataQueries })).catch((e: unknown) => e);
      const badId = await send([{ Id: 'Requests', MetricStat: metric('Requests') }]);
      expect(badId).toBeInstanceOf(ValidationException);
      const many = await send(Array.from({ length: 501 }, (_, i) => ({ Id: `m${i}`, MetricStat: metric('Requests') })));
      expect(many).toBeInstanceOf(ValidationException);
      const fn = await send([
        { Id: 'requests', MetricStat: metric('Requests') },
        { Id: 'filled', Expression: 'FILL(requests, 0) + RATE(requests)' },
      ]);
      expect(fn).toBeInstanceOf(ValidationException);
      expect((fn as Error).message).toContain('FILL, RATE');
      const fine = await once.send(
        new GetMetricDataCommand({
          StartTime: T0,
          EndTime: at(180),
          MetricDataQueries: Array.from({ length: 500 }, (_, i) => ({ Id: `m${i}`, MetricStat: metric('Requests'), ReturnData: i === 0 })),
        }),
      );
      expect(fine.MetricDataResults).toHaveLength(1);
    });
  });

  describe('faults', () => {
    it('failNext surfaces as the named SDK exception', async () => {
      cw.failNext(1, { type: 'Throttling', message: 'Rate exceeded' });
      const throttled = await once.send(new DescribeAlarmsCommand({})).catch((e: unknown) => e);
      expect(throttled).toBeInstanceOf(CloudWatchServiceException);
      expect(throttled).toMatchObject({ name: 'Throttling', message: 'Rate exceeded', $metadata: { httpStatusCode: 400 } });

      cw.failNext(1, { type: 'InternalServiceError', message: 'boom', status: 500 });
      const internal = await once
        .send(new GetMetricDataCommand({ StartTime: T0, EndTime: at(60), MetricDataQueries: [{ Id: 'm', MetricStat: metric('Requests') }] }))
        .catch((e: unknown) => e);
      expect(internal).toBeInstanceOf(InternalServiceFault);
      expect(internal).toMatchObject({ name: 'InternalServiceFault', Code: 'InternalServiceError', $fault: 'server', $metadata: { httpStatusCode: 500 } });

      // The next call is served again.
      await expect(once.send(new DescribeAlarmsCommand({}))).resolves.toMatchObject({ MetricAlarms: [] });
    });

    it('a retrying client gets past one 500', async () => {
      cw.setAlarm('a', 'OK');
      cw.failNext(1, { type: 'InternalServiceError', message: 'boom' });
      const out = await client.send(new DescribeAlarmsCommand({ AlarmNames: ['a'] }));
      expect(out.MetricAlarms).toHaveLength(1);
      expect(out.$metadata.attempts).toBe(2);
      expect(cw.calls).toHaveLength(2);
    });

    it('delayNext holds the reply until the caller aborts', async () => {
      cw.delayNext(1, 10 * 60_000);
      const abort = new AbortController();
      const pending = once.send(new DescribeAlarmsCommand({}), { abortSignal: abort.signal });
      await cw.waitForCalls(1); // the request is held by the server now
      abort.abort();
      await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
      // The stand-in still answers the next request at once.
      await expect(once.send(new DescribeAlarmsCommand({}))).resolves.toMatchObject({ MetricAlarms: [] });
    });

    it('stop() releases a held reply', async () => {
      const other = await new CloudWatchStandIn().start();
      const c = new CloudWatchClient({
        region: 'us-east-1',
        endpoint: other.url,
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
        maxAttempts: 1,
      });
      other.setAlarm('held', 'ALARM');
      other.delayNext(1, 10 * 60_000);
      const pending = c.send(new DescribeAlarmsCommand({ AlarmNames: ['held'] }));
      await other.waitForCalls(1);
      await other.stop();
      await expect(pending).resolves.toMatchObject({ MetricAlarms: [expect.objectContaining({ AlarmName: 'held' })] });
      c.destroy();
    });
  });
});
