/**
 * Names a user gives (in a spec, a token, the operator's config) are looked
 * up among what was declared, never among what every object inherits: each
 * lookup reachable from a spec or config is fed the names Object.prototype
 * has and must refuse them, naming them, as it refuses any undeclared name.
 * The lint rule that keeps it so (local/own-properties, eslint.config.js) is
 * checked here too: it flags such a lookup and passes the guarded one.
 */
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { actuationIssues, parseTargets } from '../../shared/actuation/targets.js';
import { queriesOf } from '../../shared/adapters/cloudwatch/providers.js';
import { canonicalJson } from '../../shared/canonical-json.js';
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import { OperatorSecrets, SecretNotFoundError } from '../../shared/outbound/secrets.js';
import { own } from '../../shared/own.js';
import { judge } from '../../shared/rollout/gates.js';
import { cloudwatchAlarmGateSchema, cloudwatchMetricGateSchema } from '../../shared/rollout/gate-spec.js';
import { outboundIssues, parseRolloutSpec } from '../../shared/rollout/spec.js';

/** What Object.prototype has: each reads as something on a plain object that declares nothing. */
const INHERITED = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf'] as const;
const PROM = 'http://prometheus.internal:9090';

const stages = [{ name: 'all', percent: 100, bakeSeconds: 0 }];

describe.each(INHERITED)('the name %s, never declared', (name) => {
  it('as a spec’s actuator: refused, naming it, like any undeclared target', () => {
    const targets = parseTargets({ web: { type: 'lambdaAlias', functionName: 'web', alias: 'live' } });
    // As a spec asks it (only "constructor" is a target name a spec may write; the check holds for any name).
    const spec = { target: { version: '3' }, actuators: [name] };
    expect(actuationIssues(spec, targets)).toEqual([`actuators.0: no target named ${name} is declared (declared: web)`]);
    expect(actuationIssues(spec, {})).toEqual([`actuators.0: no target named ${name} is declared (none are)`]);
  });

  it('as a spec’s actuator in a whole spec, as the API takes it: refused, naming it', () => {
    const targets = parseTargets({ web: { type: 'lambdaAlias', functionName: 'web', alias: 'live' } });
    const spec = () => parseRolloutSpec({ target: { service: 'web', version: '3' }, actuators: [name], stages });
    if (/^[a-z0-9-]+$/.test(name)) expect(actuationIssues(spec(), targets)).toEqual([`actuators.0: no target named ${name} is declared (declared: web)`]);
    else expect(spec).toThrow(/actuators\.0: a target name/);
  });

  it('as a spec’s preset: refused, naming it', () => {
    expect(() => parseRolloutSpec({ preset: name, target: { service: 'web', version: 'v2' } })).toThrow(`preset: unknown preset "${name}"`);
  });

  it('as a gate’s credential: refused at creation, naming it; the policy hands out nothing under it', () => {
    const policy = new OutboundPolicy({ origins: [PROM], credentials: { prom: { type: 'bearer', origin: PROM, token: { env: 'PROM_TOKEN' } } } });
    const spec = parseRolloutSpec({
      target: { service: 'web', version: 'v2' },
      stages: [
        {
          name: 'all',
          percent: 100,
          bakeSeconds: 0,
          gates: { providers: [{ type: 'prometheus', name: 'errors', query: 'up', comparison: '<', threshold: 1, address: PROM, credential: name }] },
        },
      ],
    });
    expect(outboundIssues(spec, policy)).toEqual([
      `stages.0.gates.providers.0.credential: no credential named "${name}" in the operator's outbound configuration`,
    ]);
    expect(() => policy.credential(name)).toThrow(`no credential named "${name}"`);
  });

  it('as an environment variable or a Secrets Manager key the operator named: not found, naming it', async () => {
    const secrets = new OperatorSecrets({ env: { SET: 'x' }, secretsManager: () => Promise.resolve('{"token":"t"}') });
    await expect(secrets.get({ env: name })).rejects.toThrow(SecretNotFoundError);
    await expect(secrets.get({ env: name })).rejects.toThrow(`environment variable ${name} is not set`);
    await expect(secrets.get({ secretsManager: 'arn:aws:secretsmanager:eu-west-1:1:secret:s', key: name })).rejects.toThrow(`has no string at key ${name}`);
  });

  it('as an alarm no answer holds a state for: not found, never passed', () => {
    const gate = cloudwatchAlarmGateSchema.parse({ type: 'cloudwatchAlarm', name: 'alarms', alarms: [name] });
    const reading = judge(gate, { kind: 'alarms', states: {}, answer: '{}' }, { attempt: 1, stage: 0, at: 0, source: 'poll' });
    expect(reading.outcome).toBe('inconclusive');
    expect(reading.reason).toBe(`alarm ${name} not found`);
  });

  it('as a word of a metric expression that names no metric: left as written, not taken for one', () => {
    const gate = cloudwatchMetricGateSchema.parse({
      type: 'cloudwatchMetric',
      name: 'ratio',
      expression: `errors / ${name}`,
      metrics: { errors: { namespace: 'AWS/Lambda', metricName: 'Errors', stat: 'Sum' } },
      comparison: '<',
      threshold: 1,
    });
    expect(queriesOf(gate, 'g0')[0]!.Expression).toBe(`g0_errors / ${name}`);
  });

  it('own() reads nothing inherited, and what an object holds itself under the name', () => {
    expect(own({}, name)).toBeUndefined();
    expect(own(JSON.parse(`{${JSON.stringify(name)}:1}`) as Record<string, number>, name)).toBe(1);
    expect(canonicalJson(JSON.parse(`{${JSON.stringify(name)}:1,"a":2}`))).toBe(`{${name < 'a' ? `"${name}":1,"a":2` : `"a":2,"${name}":1`}}`);
  });
});

describe('the lint rule local/own-properties', () => {
  const eslint = new ESLint({ cwd: process.cwd() });
  // Linted as if it were this file: any file of the project gets the rule and the type information it needs.
  const lint = async (code: string) =>
    (await eslint.lintText(code, { filePath: 'shared/own.ts' }))[0]!.messages.filter((m) => m.ruleId === 'local/own-properties').map((m) => m.line);

  it('flags a lookup and an `in` by a non-literal name on a record, and passes own(), Object.hasOwn, literals, numbers and Maps', async () => {
    const code = [
      'export function f(targets: Record<string, { type: string }>, name: string, list: string[], i: number, m: Map<string, number>): unknown {',
      '  const a = targets[name];', // 2: flagged
      '  const b = name in targets;', // 3: flagged
      "  const c = targets['web'];",
      "  const d = Object.hasOwn(targets, name) ? 'x' : 'y';",
      '  const e = list[i];',
      '  const g = m.get(name);',
      "  const h = 'web' in targets;",
      '  targets[name] = { type: "w" };',
      '  return [a, b, c, d, e, g, h];',
      '}',
      '',
    ].join('\n');
    expect(await lint(code)).toEqual([2, 3]);
  }, 300_000);
});
