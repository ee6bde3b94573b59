import { rolloutSpecJsonSchema } from '../../../shared/rollout/spec.js';
import { code, GENERATED, page, text } from './markdown.js';
import { fieldTable, fields, type Schema } from './schema.js';

/**
 * The rollout spec reference, from its JSON Schema (rolloutSpecJsonSchema,
 * made from the zod schemas the API checks specs with): the fields every
 * form shares, then the explicit form's and each preset's own.
 */
export function specReference(): string {
  const schema = rolloutSpecJsonSchema() as unknown as Schema & { anyOf: readonly Schema[]; $id?: string; title?: string };
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
    `A spec takes one of ${forms.length} forms: ${forms.map(title).join(', ')}. Unknown fields are refused. A field's path is dotted; ${code('[]')} stands for each item of an array. Gate providers (${code('gates.providers[]')}) are described in the gate guides; the schema leaves their items open here.`,
    '## Fields of every form',
    fieldTable(fields(pick(forms[0]!, common))),
    ...forms.flatMap((form) => {
      const own = Object.keys(form.properties ?? {}).filter((n) => !common.includes(n));
      return [`## ${title(form)}`, fieldTable(fields(pick(form, own)))];
    }),
  ]);
}
