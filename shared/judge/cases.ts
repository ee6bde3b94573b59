/**
 * Judgement cases as `rollout gates judge` reads them: `{"cases": [...]}`,
 * each checked on its own, each answered by one object in input order. A bad
 * case is answered with the field at fault and no verdict; it never stops the
 * others.
 */
import { z } from 'zod';
import { effectSizeDefaults, judgeMannWhitney, MANN_WHITNEY_DEFAULTS, type MannWhitneyVerdict } from './mann-whitney.js';
import { judgeSequentialRate } from './sequential-rate.js';
import { sampleRatioMismatch, SRM_ALPHA } from './srm.js';

const probability = (what: string) =>
  z.number({ error: `${what} must be a number in (0, 1)` }).refine((v) => v > 0 && v < 1, { message: `${what} must be in (0, 1), exclusive` });
const point = z.number({ error: 'a point must be a number, or null when missing' }).nullable();
const count = z.number({ error: 'a count must be a number' }).int('a count must be a whole number').min(0, 'a count cannot be negative');
const arm = z.tuple([count, count], { error: 'an arm is [requests, errors]' }).refine(([n, e]) => e <= n, { message: 'errors cannot exceed requests' });

const mannWhitneyCase = z
  .object({
    id: z.string(),
    kind: z.literal('mann-whitney'),
    baseline: z.array(point),
    canary: z.array(point),
    direction: z.enum(['increase', 'decrease', 'either']).default(MANN_WHITNEY_DEFAULTS.direction),
    confidence: probability('confidence').default(MANN_WHITNEY_DEFAULTS.confidence),
    tolerance: z.number().min(0, 'tolerance cannot be negative').default(MANN_WHITNEY_DEFAULTS.tolerance),
    effectSize: z
      .object({
        measure: z.enum(['meanRatio', 'cles']).default('meanRatio'),
        allowedIncrease: z.number().optional(),
        allowedDecrease: z.number().optional(),
        criticalIncrease: z.number().optional(),
        criticalDecrease: z.number().optional(),
      })
      .strict()
      .default({ measure: 'meanRatio' }),
    critical: z.boolean().default(false),
    mustHaveData: z.boolean().default(false),
    nanStrategy: z.enum(['remove', 'replace']).default(MANN_WHITNEY_DEFAULTS.nanStrategy),
  })
  .strict();

const sequentialCase = z
  .object({
    id: z.string(),
    kind: z.literal('sequential-rate'),
    alpha: probability('alpha'),
    direction: z.literal('increase', { error: 'direction must be "increase" (a higher canary error rate fails)' }).default('increase'),
    minSamples: count.default(0),
    looks: z.array(z.object({ baseline: arm, canary: arm }).strict()),
  })
  .strict();

const sampleRatioCase = z
  .object({
    id: z.string(),
    kind: z.literal('sample-ratio'),
    canary: count,
    baseline: count,
    percent: z
      .number({ error: 'percent must be a number in (0, 100)' })
      .refine((v) => v > 0 && v < 100, { message: 'percent must be in (0, 100), exclusive: at 0 or 100 % there is no split to check' }),
    alpha: probability('alpha').default(SRM_ALPHA),
  })
  .strict();

export type JudgeAnswer =
  | ({ readonly id: string } & Omit<MannWhitneyVerdict, 'reason'>)
  | { readonly id: string; readonly verdict: 'fail' | 'continue'; readonly decidedAt: number | null }
  /** sample-ratio: `observed` is the canary's share (0..1) of the counts. */
  | { readonly id: string; readonly mismatch: boolean; readonly observed: number | null; readonly chiSquare: number | null; readonly pValue: number | null }
  | { readonly id: string | null; readonly error: { readonly field: string; readonly message: string } };

/** `looks[1].canary` from zod's path. */
function fieldOf(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || '(case)';
}

function refused(id: unknown, field: string, message: string): JudgeAnswer {
  return { id: typeof id === 'string' ? id : null, error: { field, message } };
}

/** One case's answer. */
export function judgeCase(raw: unknown): JudgeAnswer {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return refused(null, '(case)', 'a case must be an object');
  const c = raw as Record<string, unknown>;
  if (typeof c.id !== 'string' || c.id === '') return refused(null, 'id', 'every case needs an id (a non-empty string)');
  const schema =
    c.kind === 'mann-whitney' ? mannWhitneyCase : c.kind === 'sequential-rate' ? sequentialCase : c.kind === 'sample-ratio' ? sampleRatioCase : null;
  if (!schema) return refused(c.id, 'kind', `unknown kind ${JSON.stringify(c.kind)}: expected "mann-whitney", "sequential-rate" or "sample-ratio"`);
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return refused(c.id, fieldOf(issue.path), issue.message);
  }
  const v = parsed.data;
  if (v.kind === 'mann-whitney') {
    const { reason: _reason, ...verdict } = judgeMannWhitney(v.baseline, v.canary, {
      ...v,
      effectSize: { ...effectSizeDefaults(v.effectSize.measure), ...v.effectSize },
    });
    return { id: v.id, ...verdict };
  }
  if (v.kind === 'sample-ratio') {
    const r = sampleRatioMismatch(v.canary, v.baseline, v.percent, v.alpha);
    // Nothing counted: nothing to say, and no mismatch.
    return r
      ? { id: v.id, mismatch: r.mismatch, observed: r.observed, chiSquare: r.chiSquare, pValue: r.pValue }
      : { id: v.id, mismatch: false, observed: null, chiSquare: null, pValue: null };
  }
  for (let k = 1; k < v.looks.length; k++) {
    for (const side of ['baseline', 'canary'] as const) {
      const [n0, e0] = v.looks[k - 1]![side];
      const [n1, e1] = v.looks[k]![side];
      if (n1 < n0 || e1 < e0) return refused(v.id, `looks[${k}].${side}`, `cumulative counts cannot decrease: [${n0}, ${e0}] then [${n1}, ${e1}]`);
    }
  }
  const { verdict, decidedAt } = judgeSequentialRate(v.looks, v);
  return { id: v.id, verdict, decidedAt };
}

export class CasesFileError extends Error {}

/** The answers to a cases file's text; a file that is not `{"cases": [...]}` throws CasesFileError. */
export function judgeCases(text: string): JudgeAnswer[] {
  if (text.trim() === '') throw new CasesFileError('the cases file is empty');
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new CasesFileError(`the cases file is not JSON: ${(err as Error).message}`);
  }
  const cases = typeof doc === 'object' && doc !== null && !Array.isArray(doc) ? (doc as { cases?: unknown }).cases : undefined;
  if (!Array.isArray(cases)) throw new CasesFileError('the cases file must be an object {"cases": [...]}');
  return cases.map(judgeCase);
}
