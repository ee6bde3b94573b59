import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TARGET_GATE_EDITS } from '../chaos/target-gate.js';
import { VARIANTS, type SourceEdit } from '../chaos/variants.js';

const root = join(import.meta.dirname, '../..');

/**
 * Each broken variant's edits still find their text in the product, as the
 * load hook needs them to: caught here, in the unit suite, rather than when
 * the chaos run starts a process with a variant that no longer applies.
 */
describe('chaos source edits apply to the code as it is', () => {
  const edits: [string, SourceEdit][] = [
    ...Object.values(VARIANTS).flatMap((v) => v.edits.map((e): [string, SourceEdit] => [v.name, e])),
    ...TARGET_GATE_EDITS.map((e): [string, SourceEdit] => ['target gate', e]),
  ];
  it.each(edits.map(([name, e]) => [name, e.file, e] as const))('%s: %s', (_name, _file, e) => {
    const found = readFileSync(join(root, e.file), 'utf8').split(e.find).length - 1;
    if (e.last) expect(found).toBeGreaterThanOrEqual(1);
    else expect(found).toBe(1);
  });
});
