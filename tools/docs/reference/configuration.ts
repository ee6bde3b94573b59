import { hostname } from 'node:os';
import { z } from 'zod';
import type { CommandSpec, OptionSpec } from '../../../shared/runtimes/cli/command-spec.js';
import { COMMAND_TABLE, ROOT } from '../../../shared/runtimes/cli/commands/index.js';
import { lambdaEnvSchema } from '../../../shared/runtimes/lambda-env.js';
import { nodeConfigSchema } from '../../../shared/runtimes/node/config.js';
import { cell, code, GENERATED, page, table } from './markdown.js';
import { constraints, describe, fields, typeOf, type Schema } from './schema.js';
import { interfaceMembers, propertyDocs, type Member } from './source.js';

/**
 * The configuration reference: the CLI's environment variables (from the
 * command table), a node's configuration as validated (nodeConfigSchema), a
 * Lambda function's environment (lambdaEnvSchema), and the CDK construct's
 * props (infra/control-plane-props.ts, read with the compiler's parser).
 */
export function configurationReference(): string {
  return page([
    '# Configuration reference',
    GENERATED('the command table, shared/runtimes/node/config.ts, shared/runtimes/lambda-env.ts and infra/control-plane-props.ts'),
    'A node (`rollout serve`, `rollout start`) is configured by flags, each with an environment variable that gives it when the flag is absent; what it is given is checked as a whole (below) and a bad value is refused naming the field. A Lambda function of the deployed stack reads its environment, which the CDK construct sets from its props.',
    '## Environment variables of the CLI',
    `Each gives a flag when the flag is absent; the [CLI reference](./cli.md) has every flag.`,
    envTable(),
    '## Node configuration',
    'What `rollout serve` and `rollout start` build from their flags and check (`nodeConfigSchema`, shared/runtimes/node/config.ts) before the node starts. The JSON files some flags name (`--outbound-config`, `--targets-config`) are checked by the `outbound` and `targets` fields.',
    schemaTable(nodeConfigSchema, docs('shared/runtimes/node/config.ts', 'nodeConfigSchema', { ...settingsDocs() })),
    '## Lambda function environment',
    'What each function of the deployed stack reads at cold start (`lambdaEnvSchema`, shared/runtimes/lambda-env.ts); the construct sets these from its props. A bad value stops the function naming the variable: `invalid environment config: ROLLOUT_X: what is wrong`.',
    schemaTable(lambdaEnvSchema, docs('shared/runtimes/lambda-env.ts', 'lambdaEnvSchema')),
    '## CDK construct props',
    '`new RolloutControlPlane(scope, id, props)` (`rollout-control-plane/cdk`) takes `RolloutControlPlaneProps` (infra/control-plane-props.ts). Every prop is optional.',
    membersTable(interfaceMembers('infra/control-plane-props.ts', 'RolloutControlPlaneProps')),
    '### FunctionOverrides',
    'The value of each entry of `functions`, by function name.',
    membersTable(interfaceMembers('infra/control-plane-props.ts', 'FunctionOverrides')),
  ]);
}

/** Every option with an environment variable, by variable: the flag and the commands that take it. */
function envTable(): string {
  const rows = new Map<string, { option: OptionSpec; commands: string[] }>();
  const walk = (spec: CommandSpec, path: readonly string[]) => {
    const here = [...path, spec.name];
    for (const o of spec.options ?? []) {
      if (!o.env) continue;
      const key = `${o.env}\u0000${o.flags}`;
      const row = rows.get(key) ?? { option: o, commands: [] };
      row.commands.push(`[${here.slice(1).join(' ')}](./cli.md#${here.join('-').toLowerCase()})`);
      rows.set(key, row);
    }
    for (const sub of spec.commands ?? []) walk(sub, here);
  };
  for (const spec of COMMAND_TABLE) walk(spec, [ROOT.name]);
  const sorted = [...rows.values()].sort((a, b) => a.option.env!.localeCompare(b.option.env!) || a.option.flags.localeCompare(b.option.flags));
  return table(
    ['Variable', 'Flag', 'Default', 'Description', 'Commands'],
    sorted.map(({ option: o, commands }) => [
      code(o.env!),
      code(o.flags),
      o.default !== undefined ? code(JSON.stringify(o.default)) : o.required ? 'required' : '',
      cell(o.description),
      commands.join(', '),
    ]),
  );
}

function settingsDocs(): Record<string, string> {
  return Object.fromEntries(propertyDocs('shared/runtimes/settings.ts', 'runtimeSettings'));
}

function docs(file: string, variable: string, extra: Record<string, string> = {}): Map<string, string> {
  return new Map([...Object.entries(extra), ...propertyDocs(file, variable)]);
}

/** A default that is this machine's (its host name) is said as such, so the page is the same wherever it is written. */
function defaultCell(value: unknown): string {
  if (value === undefined) return '';
  if (value === hostname()) return "this machine's host name";
  return code(JSON.stringify(value));
}

function schemaTable(schema: z.ZodType, notes: Map<string, string>): string {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Schema;
  return table(
    ['Field', 'Type', 'Required', 'Default', 'Description'],
    fields(json).map((r) => [
      code(r.path),
      typeOf(r.schema),
      r.required ? 'yes' : '',
      defaultCell(r.schema.default),
      describe(cell(notes.get(r.path.replace(/\[\]/g, '')) ?? ''), constraints(r.schema)),
    ]),
  );
}

function membersTable(members: readonly Member[]): string {
  return table(
    ['Prop', 'Type', 'Default', 'Description'],
    members.map((m) => [code(`${m.name}${m.optional ? '?' : ''}`), code(m.type), cell(m.default), cell(m.doc)]),
  );
}
