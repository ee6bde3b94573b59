/**
 * The JSON Schemas of a rollout spec and a run request (`rollout spec
 * schema`), checked with a real JSON Schema validator (Ajv, draft 2020-12):
 * every spec the docs show validates and parses; what the parser refuses for
 * its shape, the schema refuses too.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { runRequestJsonSchema } from '../../shared/api/handler.js';
import { parseRolloutSpec, rolloutSpecJsonSchema } from '../../shared/rollout/spec.js';
import { docsPages } from '../../tools/docs/anchors.js';

const root = join(import.meta.dirname, '../..');
/** README and the docs site's pages, where specs are shown. */
const docs = ['README.md', ...docsPages()].map((doc) => ({ doc, text: readFileSync(join(root, doc), 'utf8') }));
const ajv = new Ajv2020({ allErrors: true, strict: true, validateFormats: false });
const spec = ajv.compile(rolloutSpecJsonSchema());
const run = ajv.compile(runRequestJsonSchema());
const target = { service: 'checkout', version: 'v42' };

/** The specs the docs show: each ```json block that is one, and each inline preset (with a target added: the docs show them without). */
function docSpecs(): { where: string; value: unknown }[] {
  const out: { where: string; value: unknown }[] = [];
  for (const { doc, text: page } of docs) {
    for (const m of page.matchAll(/```json\n([\s\S]*?)```/g)) {
      const text = m[1]!;
      if (/"target"/.test(text) && /"stages"|"preset"/.test(text))
        out.push({ where: `${doc} line ${page.slice(0, m.index).split('\n').length}`, value: JSON.parse(text) });
    }
    for (const m of page.matchAll(/`(\{"preset": [^`]*\})`/g))
      out.push({ where: `${doc} preset ${m[1]}`, value: { target, ...(JSON.parse(m[1]!) as object) } });
  }
  return out;
}

describe('rollout spec JSON Schema', () => {
  it('every spec the docs show is valid by the schema and by the parser', () => {
    const specs = docSpecs();
    expect(specs.length).toBeGreaterThanOrEqual(5);
    for (const { where, value } of specs) {
      expect(spec(value), `${where}: ${ajv.errorsText(spec.errors)}`).toBe(true);
      expect(() => parseRolloutSpec(value), where).not.toThrow();
    }
  });

  it('what the parser refuses for its shape, the schema refuses too', () => {
    const stages = [{ name: 'all', percent: 100, bakeSeconds: 0 }];
    const bad: [string, unknown][] = [
      ['no target', { stages }],
      ['a misspelt gate', { target, stages: [{ ...stages[0], gates: { maxErrorRat: 0.1 } }] }],
      ['a percent over 100', { target, stages: [{ name: 'x', percent: 150, bakeSeconds: 0 }] }],
      ['an unknown preset', { target, preset: 'zigzag' }],
      ['no stages', { target, stages: [] }],
      ['a negative bake', { target, stages: [{ ...stages[0], bakeSeconds: -1 }] }],
      ['an unknown key', { target, stages, color: 'blue' }],
      // A gate's own fields are the schema's too: an editor names the misspelt one.
      [
        'a misspelt gate field',
        {
          target,
          stages: [
            { ...stages[0], gates: { providers: [{ type: 'prometheus', name: 'p', address: 'http://p:9090', query: 'q', comparison: '<', thresold: 1 }] } },
          ],
        },
      ],
      ['an unknown gate type', { target, stages: [{ ...stages[0], gates: { providers: [{ type: 'datadog', name: 'd' }] } }] }],
      ['a canary of 100', { target, preset: 'canary', canaryPercent: 100 }],
    ];
    for (const [why, value] of bad) {
      expect(() => parseRolloutSpec(value), why).toThrow();
      expect(spec(value), why).toBe(false);
    }
    expect(spec({ target, stages })).toBe(true);
  });
});

describe('run request JSON Schema', () => {
  it('accepts what POST /runs takes, refuses what it refuses for its shape', () => {
    expect(run({ id: 'nightly', items: [{ doc: 1 }, 'any JSON', 3], spec: { model: 'v2' }, shards: 4 })).toBe(true);
    expect(run({ items: [{ doc: 1 }], itemsPerSecond: 500 })).toBe(true);
    expect(run({ items: [] })).toBe(false);
    expect(run({ id: 'bad id with spaces', items: [1] })).toBe(false);
    expect(run({ items: [1], color: 'blue' })).toBe(false);
  });
});
