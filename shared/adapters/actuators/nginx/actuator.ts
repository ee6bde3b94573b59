import { execFile } from 'node:child_process';
import { readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import {
  outranks,
  parseStamp,
  stampText,
  TargetMovedError,
  TargetRefusedError,
  type Actuator,
  type Desired,
  type Observed,
  type Stamp,
} from '../../../actuation/port.js';
import type { NginxTarget } from '../../../actuation/targets.js';

const run = promisify(execFile);

/** How long a reload may take to start workers on the new config before the write counts as failed. */
const RELOAD_WAIT_MS = 10_000;

/**
 * The nginx actuator: it owns one include file, a `split_clients` block that
 * sets a variable to the canary or the stable upstream by a hash of a key
 * (MurmurHash2 of the key: sticky for a key, and monotone as the percent
 * grows, since the canary takes the first P % of the hash range). The
 * operator's config includes the file and proxies to the variable.
 *
 * nginx has no conditional write, so a write re-reads the stamp first (a
 * higher epoch's stamp: TargetMovedError), replaces the file atomically
 * (rename), runs `nginx -t`, and restores the previous file when nginx
 * refuses it, so a config nginx refuses is never left in place; then it
 * reloads and reads the file back.
 */
export class NginxActuator implements Actuator {
  readonly kind = 'nginx';

  constructor(
    readonly target: string,
    private readonly config: NginxTarget,
  ) {}

  async read(): Promise<Observed> {
    return this.observe(await this.current());
  }

  /** `observed` is not needed: nginx cannot condition a write, so the stamp is read again just before it. */
  async write(desired: Desired, stamp: Stamp, _observed?: Observed): Promise<Observed> {
    const before = await this.current();
    const found = before === null ? null : parseStamp(stampLine(before));
    const why = outranks(found, stamp);
    if (why) throw new TargetMovedError(this.target, why);
    const next = this.render(desired, stamp);
    await this.replace(next);
    try {
      await this.nginx('-t');
    } catch (err) {
      if (before === null) await unlink(this.config.include);
      else await this.replace(before);
      throw new TargetRefusedError(this.target, `nginx -t refused it, the previous file is back: ${stderrOf(err)}`);
    }
    const workers = await this.workers();
    await this.nginx('-s', 'reload');
    await this.reloaded(workers);
    return this.observe(await this.current());
  }

  /**
   * A reload is a signal: the master starts workers on the new config and
   * tells the old ones to finish, and an old worker still answers on the
   * keep-alive connections it holds until it has closed them. So the write is
   * live once a new worker exists and the old ones are gone; an old worker
   * held by a long request past RELOAD_WAIT_MS is left to finish it (new
   * connections already reach the new config). Where /proc cannot tell (not
   * Linux, another pid namespace), once signalled.
   */
  private async reloaded(before: ReadonlySet<number> | null): Promise<void> {
    if (!before) return;
    const deadline = Date.now() + RELOAD_WAIT_MS;
    let started = false;
    while (Date.now() < deadline) {
      const now = await this.workers();
      if (!now) return;
      started ||= [...now].some((pid) => !before.has(pid));
      if (started && ![...before].some((pid) => now.has(pid))) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    if (!started) throw new Error(`${this.target}: nginx was signalled to reload but started no new worker within ${RELOAD_WAIT_MS} ms`);
  }

  /** The worker pids of the nginx master running our config; null when they cannot be found. */
  private async workers(): Promise<Set<number> | null> {
    const master = await this.masterPid();
    if (master === null) return null;
    // The kernel lists a process's children directly; without that file, every process is looked at.
    const listed = await readFile(`/proc/${master}/task/${master}/children`, 'utf8').catch(() => null);
    if (listed !== null) return new Set(listed.trim().split(/\s+/).filter(Boolean).map(Number));
    const all = (await readdir('/proc').catch(() => [] as string[])).filter((e) => /^\d+$/.test(e));
    const children = await Promise.all(all.map(async (pid) => ((await stat(pid))[1] === String(master) ? Number(pid) : null)));
    return new Set(children.filter((pid): pid is number => pid !== null));
  }

  private master: number | null = null;

  /**
   * The master running our config: the pid in the pid file its config names,
   * as long as that process is still the master of our config; else found
   * once among all processes (a config without a pid directive).
   */
  private async masterPid(): Promise<number | null> {
    const ours = async (pid: number) => {
      const cmd = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).replace(/\0/g, ' ').trim();
      return cmd.startsWith('nginx: master process') && cmd.includes(this.config.config);
    };
    if (this.master !== null && (await ours(this.master))) return this.master;
    const conf = await readFile(this.config.config, 'utf8').catch(() => '');
    const file = /^\s*pid\s+([^;\s]+)\s*;/m.exec(conf)?.[1];
    const path = file === undefined ? undefined : file.startsWith('/') ? file : `${this.config.prefix ?? ''}/${file}`;
    const fromFile = path === undefined ? NaN : Number((await readFile(path, 'utf8').catch(() => '')).trim());
    if (Number.isInteger(fromFile) && fromFile > 0 && (await ours(fromFile))) return (this.master = fromFile);
    for (const pid of (await readdir('/proc').catch(() => [] as string[])).filter((e) => /^\d+$/.test(e))) {
      if (await ours(Number(pid))) return (this.master = Number(pid));
    }
    return (this.master = null);
  }

  /** The include as nginx will read it. */
  render(d: Pick<Desired, 'percent' | 'final'>, stamp: Stamp | null): string {
    const { variable, key, stableUpstream: stable, canaryUpstream: canary } = this.config;
    const entries =
      d.final || d.percent >= 100
        ? d.final
          ? [`*  ${canary};`]
          : [`100%  ${canary};`]
        : d.percent > 0
          ? [`${fmt(d.percent)}%  ${canary};`, `*  ${stable};`]
          : [`*  ${stable};`];
    return [
      stamp ? `# ${stampText(stamp)}` : '# no rollout has written this file',
      '# Written by the rollout control plane: a change made here by hand is drift, and pauses the rollout.',
      `split_clients "${key}" $${variable} {`,
      ...entries.map((e) => `    ${e}`),
      '}',
      '',
    ].join('\n');
  }

  private observe(text: string | null): Observed {
    if (text === null) return { percent: 0, final: false, stamp: null, detail: `${this.config.include} absent` };
    const stamp = parseStamp(stampLine(text));
    const split = parseSplit(text, this.config.variable);
    if (!split)
      return {
        percent: 0,
        final: false,
        stamp,
        detail: `${this.config.include} holds no split_clients for $${this.config.variable}`,
        foreignSplit: `${this.config.include} is not a split this actuator wrote`,
      };
    const { canaryUpstream: canary, stableUpstream: stable } = this.config;
    const others = split.entries.filter((e) => e.upstream !== canary && e.upstream !== stable);
    const percent = round2(split.entries.filter((e) => e.upstream === canary).reduce((sum, e) => sum + (e.share === '*' ? 100 - split.explicit : e.share), 0));
    const final = split.entries.length === 1 && split.entries[0]!.share === '*' && split.entries[0]!.upstream === canary;
    const detail = `${this.config.include}: ${split.entries.map((e) => `${e.share === '*' ? '*' : `${e.share}%`} ${e.upstream}`).join(', ')}`;
    return {
      percent,
      final,
      stamp,
      detail,
      ...(others.length ? { foreignSplit: `upstreams ${others.map((e) => e.upstream).join(', ')} are neither ${stable} nor ${canary}` } : {}),
    };
  }

  private async current(): Promise<string | null> {
    try {
      return await readFile(this.config.include, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  /** Whole or not at all: nginx reading the file mid-write would see half a block. */
  private async replace(text: string): Promise<void> {
    const tmp = `${this.config.include}.${process.pid}.tmp`;
    await writeFile(tmp, text);
    await rename(tmp, this.config.include);
  }

  private async nginx(...args: string[]): Promise<void> {
    const { nginx, config, prefix, errorLog } = this.config;
    await run(nginx, [...(prefix ? ['-p', prefix] : []), '-c', config, ...(errorLog ? ['-e', errorLog] : []), ...args], { timeout: 30_000 });
  }
}

const round2 = (n: number) => Math.round(n * 100) / 100;

/** A process's /proc/<pid>/stat fields after its name: [state, ppid, …]. */
async function stat(pid: string): Promise<string[]> {
  return (await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '')).replace(/^.*\) /, '').split(' ');
}
/** As split_clients reads a percentage: at most two decimals, no exponent. */
const fmt = (p: number) => String(round2(p));

function stampLine(text: string): string | null {
  const first = text.split('\n', 1)[0] ?? '';
  return first.startsWith('# ') ? first.slice(2) : null;
}

interface Split {
  readonly entries: readonly { readonly share: number | '*'; readonly upstream: string }[];
  /** The sum of the explicit percentages. */
  readonly explicit: number;
}

/** The split_clients block that sets `$variable`, read back; null when there is none or it is not one we could have written. */
function parseSplit(text: string, variable: string): Split | null {
  const block = new RegExp(`split_clients\\s+"[^"]*"\\s+\\$${variable}\\s*\\{([^}]*)\\}`).exec(text);
  if (!block) return null;
  const entries: { share: number | '*'; upstream: string }[] = [];
  for (const raw of block[1]!.split(';')) {
    const line = raw.replace(/#[^\n]*/g, '').trim();
    if (!line) continue;
    const m = /^(\*|(\d+(?:\.\d{1,2})?)%)\s+(\S+)$/.exec(line);
    if (!m) return null;
    entries.push({ share: m[1] === '*' ? '*' : Number(m[2]), upstream: m[3]! });
  }
  return { entries, explicit: entries.reduce((s, e) => s + (e.share === '*' ? 0 : e.share), 0) };
}

function stderrOf(err: unknown): string {
  const e = err as { stderr?: string; message?: string };
  return (e.stderr || e.message || String(err)).trim().split('\n').slice(-3).join(' | ');
}
