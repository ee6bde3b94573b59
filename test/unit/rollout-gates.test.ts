/**
 * Rollout-wide gates (the spec's rolloutGates): declared once, read in every
 * stage from their fromStage on, through the one function every reader of a
 * stage's gates uses (stageProviders), and refused with the field named when
 * they cannot be.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../shared/errors.js';
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import { alarmNamesOf } from '../../shared/rollout/model.js';
import { gateNamespaceIssues, hasProviderGates, outboundIssues, parseRolloutSpec, stageProviders } from '../../shared/rollout/spec.js';

const prom = (name: string, o: Record<string, unknown> = {}) => ({
  type: 'prometheus',
  name,
  address: 'http://prometheus:9090',
  query: 'sum(rate(errors[1m]))',
  comparison: '<',
  threshold: 1,
  ...o,
});
const judged = (name: string) => ({
  type: 'prometheus',
  name,
  address: 'http://prometheus:9090',
  query: 'latency{version="{{version}}"}',
  judge: { kind: 'mann-whitney' },
});
const spec = (rolloutGates: unknown, stageGates: unknown[] = []) => ({
  target: { service: 'web', version: 'v2', stableVersion: 'v1' },
  stages: [
    { name: 'canary', percent: 5, bakeSeconds: 0, gates: { providers: stageGates } },
    { name: 'half', percent: 50, bakeSeconds: 0 },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
  rolloutGates,
});
const names = (s: ReturnType<typeof parseRolloutSpec>) => s.stages.map((_, i) => stageProviders(s, i).map((g) => g.name));
const refusal = (input: unknown) => {
  try {
    parseRolloutSpec(input);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error('accepted');
};

describe('rolloutGates', () => {
  it('are read in every stage from fromStage (a name or an index; absent, the first), after the stage’s own gates', () => {
    expect(names(parseRolloutSpec(spec({ providers: [prom('fleet')] }, [prom('own')])))).toEqual([['own', 'fleet'], ['fleet'], ['fleet']]);
    expect(names(parseRolloutSpec(spec({ fromStage: 'half', providers: [prom('fleet')] })))).toEqual([[], ['fleet'], ['fleet']]);
    expect(names(parseRolloutSpec(spec({ fromStage: 2, providers: [prom('fleet')] })))).toEqual([[], [], ['fleet']]);
  });

  it('a judged one skips the stages at 100 %, where no baseline is left to judge against', () => {
    expect(names(parseRolloutSpec(spec({ providers: [prom('fleet'), judged('latency')] })))).toEqual([['fleet', 'latency'], ['fleet', 'latency'], ['fleet']]);
  });

  it('are kept in the stored spec as given, so the spec reads back equal and the stages carry only their own gates', () => {
    const s = parseRolloutSpec(spec({ fromStage: 'half', providers: [prom('fleet')] }));
    expect(s.rolloutGates).toMatchObject({ fromStage: 'half', providers: [{ name: 'fleet', intervalSeconds: 30, failureLimit: 0 }] });
    expect(s.stages.map((st) => st.gates.providers)).toEqual([[], undefined, undefined]);
    expect(parseRolloutSpec(JSON.parse(JSON.stringify(s)))).toEqual(s);
    expect(hasProviderGates(s)).toBe(true);
    expect(hasProviderGates(parseRolloutSpec({ ...spec(undefined), rolloutGates: undefined }))).toBe(false);
  });

  it('are refused naming the field: an unknown stage, a name a stage already uses, too many for a stage, none at all', () => {
    expect(refusal(spec({ fromStage: 'quarter', providers: [prom('fleet')] }))).toContain(
      'rolloutGates.fromStage: "quarter" names no stage; the stages are 0 "canary", 1 "half", 2 "all"',
    );
    expect(refusal(spec({ fromStage: 3, providers: [prom('fleet')] }))).toContain('rolloutGates.fromStage: 3 names no stage');
    expect(refusal(spec({ providers: [prom('own')] }, [prom('own')]))).toContain('rolloutGates.providers.0.name: "own" is also a gate of stage canary');
    const many = Array.from({ length: 6 }, (_, i) => prom(`own-${i}`));
    expect(refusal(spec({ providers: Array.from({ length: 5 }, (_, i) => prom(`fleet-${i}`)) }, many))).toContain(
      'rolloutGates.providers: stage canary would read 11 provider gates with its own; at most 10 a stage',
    );
    expect(refusal(spec({ providers: [] }))).toContain('rolloutGates.providers');
    expect(refusal(spec({ providers: [prom('fleet')], from: 1 }))).toContain('rolloutGates');
  });

  it('a hook before the first stage may not share a name with a rollout gate read there', () => {
    const input = { ...spec({ providers: [prom('fleet')] }), hooks: [{ type: 'webhook', name: 'fleet', hook: 'pre-rollout', url: 'https://h.example.com' }] };
    expect(refusal(input)).toContain('hooks.0.name: "fleet" is also a rollout gate read in the first stage');
  });

  it('are held to the outbound policy, the namespaces and the alarms like a stage’s gates, under their own path', () => {
    const s = parseRolloutSpec(
      spec({
        providers: [
          prom('fleet', { address: 'http://elsewhere:9090' }),
          { type: 'cloudwatchMetric', name: 'db', metric: { namespace: 'AWS/RDS', metricName: 'CPU', stat: 'Average' }, comparison: '<', threshold: 90 },
          { type: 'cloudwatchAlarm', name: 'alarms', alarms: ['web-5xx'] },
        ],
      }),
    );
    const issues = outboundIssues(s, new OutboundPolicy({ origins: ['http://prometheus:9090'] }));
    expect(issues).toEqual([expect.stringMatching(/^rolloutGates\.providers\.0\.address: /)]);
    expect(gateNamespaceIssues(s, ['Shop'])).toEqual([
      'rolloutGates.providers.1.metric.namespace: "AWS/RDS" is not a namespace this deployment\'s gates may read (Shop) (rollout gate "db")',
    ]);
    expect(alarmNamesOf(s)).toEqual(['web-5xx']);
  });
});
