import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSplitNginx, type SplitNginx } from '../../support/split-nginx.js';
import { parseStamp } from '../../../shared/actuation/port.js';
import type { TargetEdit, TargetSample, TargetStamp } from '../history.js';
import { TargetGate } from '../target-gate.js';

/**
 * The targets the chaos rollouts move: one split nginx each
 * (test/support/split-nginx.ts: a real nginx in front of two tiny versions),
 * declared to every node under the same names with `--targets-config`. One
 * nginx include carries one running rollout at a time (a second would be
 * drift by design), so each rollout that moves traffic has its own.
 *
 * The harness reads the includes itself, with plain parsing: the split's
 * share on the canary upstream and the stamp line. It never asks a node what
 * it applied.
 */

export const TARGET_NAMES = ['web', 'web-b', 'web-c', 'web-d', 'web-e', 'web-s', 'web-t'] as const;
export type TargetName = (typeof TARGET_NAMES)[number];

/** How often the harness reads every include. */
const SAMPLE_EVERY_MS = 60;

export interface Carried {
  readonly percent: number;
  readonly final: boolean;
  readonly stamp: TargetStamp | null;
}

/** An include as read: the `split_clients` block's share on `canary`, and the stamp on its first line. */
export function parseInclude(text: string | null, canary: string): Carried {
  if (text === null) return { percent: 0, final: false, stamp: null };
  const first = text.split('\n', 1)[0] ?? '';
  const s = first.startsWith('# ') ? parseStamp(first.slice(2)) : null;
  const stamp: TargetStamp | null = s
    ? { rolloutId: s.rolloutId, attempt: s.attempt, stage: s.stage, epoch: s.epoch, percent: s.percent, final: s.final }
    : null;
  const block = /split_clients\s+"[^"]*"\s+\$\w+\s*\{([^}]*)\}/.exec(text);
  const entries: { share: number | '*'; upstream: string }[] = [];
  for (const raw of block?.[1]?.split(';') ?? []) {
    const m = /^(\*|(\d+(?:\.\d+)?)%)\s+(\S+)$/.exec(raw.replace(/#[^\n]*/g, '').trim());
    if (m) entries.push({ share: m[1] === '*' ? '*' : Number(m[2]), upstream: m[3]! });
  }
  const explicit = entries.reduce((sum, e) => sum + (e.share === '*' ? 0 : e.share), 0);
  const percent =
    Math.round(entries.filter((e) => e.upstream === canary).reduce((sum, e) => sum + (e.share === '*' ? 100 - explicit : e.share), 0) * 100) / 100;
  const final = entries.length === 1 && entries[0]!.share === '*' && entries[0]!.upstream === canary;
  return { percent, final, stamp };
}

const same = (a: Carried, b: Carried) => a.percent === b.percent && a.final === b.final && JSON.stringify(a.stamp) === JSON.stringify(b.stamp);

export interface Sampler {
  readonly samples: TargetSample[];
  /** The latest reading of a target. */
  latest(target: string): TargetSample | undefined;
  stop(): Promise<void>;
}

export class ChaosTargets {
  readonly dir = mkdtempSync(join(tmpdir(), 'rollout-chaos-targets-'));
  readonly gate: TargetGate;
  readonly configFile = join(this.dir, 'targets.json');
  private readonly nginx = new Map<string, SplitNginx>();
  private readonly atRest = new Map<string, string>();

  constructor() {
    mkdirSync(join(this.dir, 'gate'));
    this.gate = new TargetGate(join(this.dir, 'gate'));
  }

  async start(): Promise<void> {
    for (const name of TARGET_NAMES) {
      const n = await startSplitNginx();
      this.nginx.set(name, n);
      this.atRest.set(name, readFileSync(n.target.include, 'utf8'));
    }
    writeFileSync(this.configFile, JSON.stringify(Object.fromEntries([...this.nginx].map(([name, n]) => [name, n.target])), null, 2));
  }

  private split(name: string): SplitNginx {
    const n = this.nginx.get(name);
    if (!n) throw new Error(`no target named ${name}`);
    return n;
  }

  async read(name: string): Promise<Carried> {
    const n = this.split(name);
    const text = await readFile(n.target.include, 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw err;
    });
    return parseInclude(text, n.target.canaryUpstream);
  }

  /** Every include, every SAMPLE_EVERY_MS, until stopped; times as `Date.now() - epochMs`, taken after each read. */
  sample(epochMs: number): Sampler {
    const samples: TargetSample[] = [];
    const last = new Map<string, TargetSample>();
    let stopping = false;
    const loop = (async () => {
      while (!stopping) {
        for (const name of this.nginx.keys()) {
          const c = await this.read(name).catch(() => null);
          if (!c) continue;
          const at = Date.now() - epochMs;
          const prev = last.get(name);
          if (prev && same(prev, c)) prev.until = at;
          else {
            const s: TargetSample = { target: name, at, until: at, ...c };
            samples.push(s);
            last.set(name, s);
          }
        }
        await new Promise((r) => setTimeout(r, SAMPLE_EVERY_MS));
      }
    })();
    return {
      samples,
      latest: (target) => last.get(target),
      stop: async () => {
        stopping = true;
        await loop;
      },
    };
  }

  /**
   * An outside writer (a person, another tool) changes the split to `percent`,
   * keeping the stamp line, as an editor saving the file would (whole).
   */
  edit(name: string, percent: number, epochMs: number): TargetEdit {
    const n = this.split(name);
    const text = readFileSync(n.target.include, 'utf8');
    const before = parseInclude(text, n.target.canaryUpstream);
    const { key, variable, canaryUpstream: canary, stableUpstream: stable } = n.target;
    const block = `split_clients "${key}" $${variable} {\n    ${percent}%  ${canary};\n    *  ${stable};\n}`;
    this.replace(
      name,
      text.replace(/split_clients\s+"[^"]*"\s+\$\w+\s*\{[^}]*\}/, () => block),
    );
    return { target: name, at: Date.now() - epochMs, stamp: before.stamp, from: before.percent, percent };
  }

  /** Every include as it was before any rollout: all on stable, no stamp (an operator's reset between schedules). */
  reset(): void {
    for (const [name, text] of this.atRest) this.replace(name, text);
  }

  private replace(name: string, text: string): void {
    const include = this.split(name).target.include;
    const tmp = `${include}.chaos.tmp`;
    writeFileSync(tmp, text);
    renameSync(tmp, include);
  }

  async stop(): Promise<void> {
    this.gate.clear();
    await Promise.all([...this.nginx.values()].map((n) => n.stop().catch(() => undefined)));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
