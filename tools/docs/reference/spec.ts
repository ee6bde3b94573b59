import { z } from 'zod';
import { providerGateUnion } from '../../../shared/rollout/gate-spec.js';
import { rolloutSpecJsonSchema } from '../../../shared/rollout/spec.js';
import { code, GENERATED, page, text } from './markdown.js';
import { fieldTable, fields, type Schema } from './schema.js';

/**
 * The rollout spec reference, from its JSON Schema (rolloutSpecJsonSchema,
 * made from the zod schemas the API checks specs with): the fields every
 * form shares, then the explicit form's and each preset's own.
 */
export function specReference(): string {
  const schema = inlined(rolloutSpecJsonSchema()) as unknown as Schema & { anyOf: readonly Schema[]; $id?: string; title?: string };
  const gates = z.toJSONSchema(providerGateUnion, { io: 'input', unrepresentable: 'any' }) as unknown as { oneOf?: Schema[]; anyOf?: Schema[] };
  const gateTypes = gates.oneOf ?? gates.anyOf ?? [];
  const forms = schema.anyOf;
  const same = (name: string) => forms.every((f) => JSON.stringify(f.properties?.[name]) === JSON.stringify(forms[0]!.properties?.[name]));
  const common = Object.keys(forms[0]!.properties ?? {}).filter(same);
  const pick = (form: Schema, names: readonly string[]): Schema => ({
    type: 'object',
    properties: Object.fromEntries(names.map((n) => [n, form.properties![n]!])),
    required: (form.required ?? []).filter((n) => names.includes(n)),
  });
  const title = (form: Schema) => {
    const preset = form.properties?.preset?.const;
    return typeof preset === 'string' ? `Preset ${code(preset)}` : 'Explicit stages';
  };
  return page([
    '# Rollout spec reference',
    GENERATED('the rollout spec schema (rolloutSpecJsonSchema, shared/rollout/spec.ts)'),
    `${text(schema.description ?? '')} The same JSON Schema is printed by ${code('rollout spec schema')} (${code(schema.$id ?? '')}); ${code('rollout spec check --file spec.json')} checks a spec as the API would, including the rules a schema cannot state (percents increasing, stage names unique).`,
    `A spec takes one of ${forms.length} forms: ${forms.map(title).join(', ')}. Unknown fields are refused. A field's path is dotted; ${code('[]')} stands for each item of an array. Gate providers (${code('gates.providers[]')}, ${code('rolloutGates.providers[]')}) take one of ${gateTypes.length} types, each with the fields [below](#gate-providers).`,
    '## Fields of every form',
    fieldTable(fields(pick(forms[0]!, common))),
    ...forms.flatMap((form) => {
      const own = Object.keys(form.properties ?? {}).filter((n) => !common.includes(n));
      return [`## ${title(form)}`, fieldTable(fields(pick(form, own)))];
    }),
    '## Gate providers',
    'A gate names its kind in `type`; each kind takes its own fields. What each reads and how it is judged: [Gates and judges](../concepts/gates.md).',
    ...gateTypes.flatMap((g) => [`### ${code(JSON.stringify(g.properties?.type?.const))}`, fieldTable(fields(g))]),
  ]);
}

/** The schema with each `$ref` into its `$defs` replaced by what it names (the spec's schema shares its parts; a page shows them in place). */
function inlined(schema: Record<string, unknown>): Record<string, unknown> {
  const defs = (schema.$defs ?? {}) as Record<string, unknown>;
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== 'object') return v;
    const { $ref, ...rest } = v as Record<string, unknown>;
    const named = typeof $ref === 'string' && $ref.startsWith('#/$defs/') ? defs[$ref.slice('#/$defs/'.length)] : undefined;
    const own = Object.fromEntries(Object.entries(rest).map(([k, x]) => [k, walk(x)]));
    return named === undefined ? (typeof $ref === 'string' ? { $ref, ...own } : own) : { ...(walk(named) as object), ...own };
  };
  const { $defs: _, ...top } = schema;
  return walk(top) as Record<string, unknown>;
}
