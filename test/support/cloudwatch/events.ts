/** AWS's documented `CloudWatch Alarm State Change` event (EventBridge user guide, single-metric alarm), one per state. */
export function alarmStateChange(alarmName: string, value: 'OK' | 'ALARM' | 'INSUFFICIENT_DATA', timestamp = '2019-10-02T17:04:40.989+0000') {
  return {
    version: '0',
    id: 'c4c1c1c9-6542-e61b-6ef0-8c4d36933a92',
    'detail-type': 'CloudWatch Alarm State Change',
    source: 'aws.cloudwatch',
    account: '123456789012',
    time: '2019-10-02T17:04:40Z',
    region: 'us-east-1',
    resources: [`arn:aws:cloudwatch:us-east-1:123456789012:alarm:${alarmName}`],
    detail: {
      alarmName,
      state: {
        value,
        reason:
          'Threshold Crossed: 1 out of the last 1 datapoints [0.0 (02/10/19 16:59:00)] was not greater than the threshold (50.0) (minimum 1 datapoint for ALARM -> OK transition).',
        reasonData:
          '{"version":"1.0","queryDate":"2019-10-02T17:04:40.985+0000","startDate":"2019-10-02T16:59:00.000+0000","statistic":"Average","period":60,"recentDatapoints":[0.0],"threshold":50.0,"evaluatedDatapoints":[{"timestamp":"2019-10-02T16:59:00.000+0000","sampleCount":1.0,"value":0.0}]}',
        timestamp,
      },
      previousState: { value: value === 'OK' ? 'ALARM' : 'OK', reason: 'Threshold Crossed', reasonData: '{}', timestamp: '2019-10-02T17:03:40.989+0000' },
      configuration: {
        description: 'Default description',
        metrics: [
          {
            id: 'c0eaa2ac-8a36-c7e6-e9f6-6c0aafb8ccb3',
            metricStat: {
              metric: { dimensions: { InstanceId: 'i-12345678901234567' }, name: 'CPUUtilization', namespace: 'AWS/EC2' },
              period: 60,
              stat: 'Average',
            },
            returnData: true,
          },
        ],
      },
    },
  };
}
