/**
 * The timeline picture of one chaos schedule: a self-contained HTML page
 * (inline SVG and CSS, a few lines of script for a hover readout) drawn from
 * the history and the checker's violations alone, so a saved run can be
 * replayed years later from a file:// URL with nothing else at hand.
 *
 * One shared time axis (schedule ms, ticks in seconds): the phases, the
 * faults as bands across every lane, one lane per node with its
 * `promotion_leader` terms and its process lifetime, the workers' and other
 * processes' lifetimes, stage promotions and rollbacks per rollout, item
 * completions per run, client ops that failed or got no answer, and the
 * violations.
 *
 * The pure helpers are exported so their reading of the history (what counts
 * as a term, when it ended, whether its epoch went backwards) is tested on
 * its own.
 */
import type { ChaosHistory, FaultRecord, ItemTransition, LeaseChange, Op, ProcessSpan, StageTransition, Violation } from './history.js';

export const LEADER_LEASE = 'promotion_leader';

// ── pure readings of the history ──────────────────────────────────────────

/** How a holder's term ended. */
export type TermEnd = 'replaced' | 'released' | 'deleted' | 'expired' | 'open';

/**
 * One uninterrupted holding of a lease by one holder at one epoch: from the
 * change that gave it the row until another holder took it, it was released
 * or deleted, its last renewal's expiry passed, or the history closed.
 */
export interface LeaseTerm {
  readonly holder: string;
  readonly epoch: number;
  readonly from: number;
  readonly to: number;
  readonly end: TermEnd;
  /** Updates that only moved the expiry. */
  readonly renewals: number;
  /**
   * `backwards`: the epoch is below one the row already had (the row was
   * reset; fencing cannot tell this holder from an old one).
   * `not-advanced`: a different holder took the row without a new epoch.
   */
  readonly anomaly: 'backwards' | 'not-advanced' | null;
  /** The highest epoch the row had before this term; null for the first term. */
  readonly previousEpoch: number | null;
  readonly firstSeq: number;
  readonly lastSeq: number;
}

/**
 * The terms of lease `name`, read from its change log in commit order.
 * `endAt` closes a term still open when the history ended.
 *
 * A renewal that arrives after the expiry it was meant to extend starts a
 * new term at the same epoch: for that gap nobody held the lease, whatever
 * the row said.
 */
export function leaderIntervals(changes: readonly LeaseChange[], name: string, endAt: number): LeaseTerm[] {
  const log = changes.filter((c) => c.name === name).sort((a, b) => a.seq - b.seq);
  const terms: LeaseTerm[] = [];
  let open: {
    holder: string;
    epoch: number;
    from: number;
    expiresAt: number | null;
    renewals: number;
    anomaly: LeaseTerm['anomaly'];
    previousEpoch: number | null;
    firstSeq: number;
    lastSeq: number;
  } | null = null;
  let maxEpoch: number | null = null;
  let lastHolderOfMax: string | null = null;

  const close = (to: number, end: TermEnd) => {
    if (!open) return;
    const { expiresAt: _, ...rest } = open;
    terms.push({ ...rest, to: Math.max(open.from, to), end });
    open = null;
  };
  const expireBefore = (at: number) => {
    if (open && open.expiresAt !== null && open.expiresAt < at) close(open.expiresAt, 'expired');
  };
  const see = (epoch: number, holder: string | null) => {
    if (maxEpoch === null || epoch > maxEpoch) {
      maxEpoch = epoch;
      lastHolderOfMax = holder;
    } else if (epoch === maxEpoch && holder !== null) lastHolderOfMax = holder;
  };

  for (const c of log) {
    expireBefore(c.at);
    if (c.change === 'delete' || c.holder === null) {
      close(c.at, c.change === 'delete' ? 'deleted' : 'released');
      see(c.epoch, null);
      continue;
    }
    if (open && open.holder === c.holder && open.epoch === c.epoch) {
      open.expiresAt = c.expiresAt;
      open.renewals += 1;
      open.lastSeq = c.seq;
      continue;
    }
    close(c.at, 'replaced');
    const anomaly: LeaseTerm['anomaly'] =
      maxEpoch === null
        ? null
        : c.epoch < maxEpoch
          ? 'backwards'
          : c.epoch === maxEpoch && lastHolderOfMax !== null && lastHolderOfMax !== c.holder
            ? 'not-advanced'
            : null;
    open = {
      holder: c.holder,
      epoch: c.epoch,
      from: c.at,
      expiresAt: c.expiresAt,
      renewals: 0,
      anomaly,
      previousEpoch: maxEpoch,
      firstSeq: c.seq,
      lastSeq: c.seq,
    };
    see(c.epoch, c.holder);
  }
  expireBefore(endAt);
  close(endAt, 'open');
  return terms;
}

export type ProcessState = 'alive' | 'killed' | 'paused' | 'stopped' | 'exited' | 'crashed';

export interface ProcessSegment {
  readonly process: string;
  readonly state: ProcessState;
  readonly from: number;
  readonly to: number;
}

/**
 * A process's life as segments: each span alive, then, until the next span
 * (or the end), the state the span ended in. A span with no stated end that
 * is followed by another is taken as stopped.
 */
export function processSegments(spans: readonly ProcessSpan[], process: string, endAt: number): ProcessSegment[] {
  const own = spans.filter((s) => s.process === process).sort((a, b) => a.from - b.from);
  const out: ProcessSegment[] = [];
  own.forEach((s, i) => {
    const to = s.to ?? endAt;
    out.push({ process, state: 'alive', from: s.from, to: Math.max(s.from, to) });
    if (s.to === null) return;
    const next = own[i + 1]?.from ?? endAt;
    if (next > s.to) out.push({ process, state: s.end ?? 'stopped', from: s.to, to: next });
  });
  return out;
}

/** The item transitions that finished an item (done or failed), in time order. */
export function itemCompletions(transitions: readonly ItemTransition[]): ItemTransition[] {
  return transitions.filter((t) => t.to.state === 'done' || t.to.state === 'failed').sort((a, b) => a.at - b.at || a.seq - b.seq);
}

/** The stage transitions the picture marks: promotions and rollbacks. */
export function stageMarks(transitions: readonly StageTransition[]): StageTransition[] {
  return transitions.filter((t) => t.to === 'promoted' || t.to === 'rolled_back').sort((a, b) => a.at - b.at || a.seq - b.seq);
}

/** Ops the system refused or never answered. */
export function troubledOps(ops: readonly Op[]): Op[] {
  return ops.filter((o) => o.outcome !== 'ok').sort((a, b) => a.invokedAt - b.invokedAt || a.id - b.id);
}

/** Counts per bin of `times` over [from, to); times outside are clamped into the end bins. */
export function histogram(times: readonly number[], from: number, to: number, bins: number): number[] {
  const counts = new Array<number>(Math.max(1, bins)).fill(0);
  const span = Math.max(1, to - from);
  for (const t of times) {
    const i = Math.min(counts.length - 1, Math.max(0, Math.floor(((t - from) / span) * counts.length)));
    counts[i] = (counts[i] ?? 0) + 1;
  }
  return counts;
}

/** The time the picture spans: the schedule from 0 (or earlier, if something happened before) to the last thing recorded. */
export function timeRange(history: ChaosHistory, violations: readonly Violation[]): { t0: number; t1: number } {
  const times: number[] = [0, history.phases.faultsUntil, history.phases.healedAt, history.phases.quietUntil];
  for (const o of history.ops) times.push(o.invokedAt, o.completedAt ?? o.invokedAt);
  for (const f of history.faults) times.push(f.startAt, f.endAt ?? f.startAt);
  for (const p of history.processes) times.push(p.from, p.to ?? p.from);
  const s = history.store;
  for (const c of s.leaseChanges) times.push(c.at);
  for (const t of s.stageTransitions) times.push(t.at);
  for (const t of s.itemTransitions) times.push(t.at);
  for (const v of violations) if (v.at !== null) times.push(v.at);
  // A loop, not Math.min(...times): a long history has more times than a call can take arguments.
  let t0 = 0;
  let t1 = 0;
  for (const t of times) {
    if (!Number.isFinite(t)) continue;
    if (t < t0) t0 = t;
    if (t > t1) t1 = t;
  }
  return { t0, t1: t1 > t0 ? t1 : t0 + 1_000 };
}

/** Tick positions (ms) at a round step in seconds, about `target` of them. */
export function ticks(t0: number, t1: number, target = 12): number[] {
  const steps = [100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_200_000, 1_800_000, 3_600_000];
  const step = steps.find((s) => (t1 - t0) / s <= target) ?? Math.ceil((t1 - t0) / target / 3_600_000) * 3_600_000;
  const out: number[] = [];
  // + 0: a range starting below zero would otherwise put a -0 tick first.
  for (let t = Math.ceil(t0 / step) * step + 0; t <= t1 + 1e-9; t += step) out.push(t);
  return out;
}

/** Rows for labelled items so that no two in a row overlap: the row index of each, in input order. */
export function packRows(extents: readonly { x0: number; x1: number }[], gap = 4): number[] {
  const order = extents.map((e, i) => ({ ...e, i })).sort((a, b) => a.x0 - b.x0 || a.i - b.i);
  const rowEnds: number[] = [];
  const rows = new Array<number>(extents.length).fill(0);
  for (const e of order) {
    let r = rowEnds.findIndex((end) => end + gap <= e.x0);
    if (r === -1) r = rowEnds.push(e.x1) - 1;
    else rowEnds[r] = e.x1;
    rows[e.i] = r;
  }
  return rows;
}

export function escapeHtml(value: string | number | boolean | null | undefined): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}

// ── drawing ───────────────────────────────────────────────────────────────

const esc = escapeHtml;
/** A class token from store text: only what CSS can take unquoted. */
const token = (s: string) => s.replace(/[^a-zA-Z0-9_-]/g, '_');
const sec = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
/** Millisecond precision where it matters (tooltips), without trailing noise. */
const secExact = (ms: number) => `${(ms / 1000).toFixed(3).replace(/0{1,2}$/, '')} s`;
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const n1 = (x: number) => (Math.round(x * 10) / 10).toString();

const WIDTH = 1200;
const LEFT = 170;
const RIGHT = 24;
const PLOT = WIDTH - LEFT - RIGHT;
/** Approximate advance of one character of the 11 px label font, to keep labels from colliding. */
const CHAR_W = 6.1;
/** Above this many completions in a run, the run's lane becomes a histogram. */
export const MAX_ITEM_TICKS = 200;
/** Above this many refused or unanswered ops, they are binned too. */
export const MAX_OP_MARKS = 300;

const HOLDER_COLOURS = ['#4e79a7', '#59a89c', '#9467bd', '#e08a2c', '#8c6d5a', '#d07aa6', '#6b8e23', '#5f7c99'];

const FAULT_COLOURS: Record<string, string> = {
  'kill-leader': '#d62728',
  'kill-follower': '#e377c2',
  'kill-worker': '#c45a7a',
  'kill-coordinator': '#a0322f',
  'pause-leader': '#e6a700',
  'zombie-leader': '#b8860b',
  'restart-leader': '#f08a24',
  'store-restart': '#1f77b4',
  'store-blackhole': '#3b3f8f',
  'store-delay': '#17becf',
  'store-lose-replies': '#6a8fd8',
  'store-throttle': '#2ca58d',
  'store-conflict': '#4a9a9a',
  'clock-offset': '#9467bd',
  'signals-duplicated': '#8c564b',
  'signals-reordered': '#a9746e',
  'signals-late': '#6d4c41',
  'slow-promotion': '#d4a017',
  'invoke-duplicated': '#bcbd22',
  'invoke-killed': '#98862d',
  'queue-redeliver': '#7f9f3f',
  'notice-duplicated': '#7f7f7f',
  'notice-late': '#5a5a5a',
};
const faultColour = (kind: string) => FAULT_COLOURS[kind] ?? '#888888';

interface Scale {
  readonly t0: number;
  readonly t1: number;
  x(t: number): number;
}

function scaleOf(t0: number, t1: number): Scale {
  return { t0, t1, x: (t) => LEFT + ((Math.min(t1, Math.max(t0, t)) - t0) / (t1 - t0)) * PLOT };
}

const title = (text: string) => `<title>${esc(text)}</title>`;
const attr = (name: string, value: string | number) => ` ${name}="${esc(value)}"`;

function laneLabel(y: number, text: string, sub?: string): string {
  const shown = text.length > 22 ? `${text.slice(0, 21)}…` : text;
  // The tooltip belongs to a group around the text, so the label's own text is exactly what is shown.
  const main = `<text class="lane-label" x="${LEFT - 10}" y="${y}" text-anchor="end">${esc(shown)}</text>`;
  const second = sub ? `<text class="lane-sub" x="${LEFT - 10}" y="${y + 12}" text-anchor="end">${esc(sub)}</text>` : '';
  return `<g class="label">${title(sub ? `${text}: ${sub}` : text)}${main}${second}</g>`;
}

function section(y: number, text: string): string {
  return `<text class="section" x="12" y="${y}">${esc(text)}</text><line class="section-rule" x1="12" x2="${WIDTH - RIGHT}" y1="${y + 5}" y2="${y + 5}"/>`;
}

function describeTerm(t: LeaseTerm): string {
  const ends: Record<TermEnd, string> = {
    replaced: 'taken over',
    released: 'released',
    deleted: 'row deleted',
    expired: 'expired (no renewal in time)',
    open: 'still held when the history closed',
  };
  const warn =
    t.anomaly === 'backwards'
      ? ` — EPOCH WENT BACKWARDS: the row had epoch ${t.previousEpoch} before`
      : t.anomaly === 'not-advanced'
        ? ` — a new holder without a new epoch (epoch ${t.epoch} was another holder's)`
        : '';
  return `${t.holder} held ${LEADER_LEASE} at epoch ${t.epoch} from ${secExact(t.from)} to ${secExact(t.to)}: ${ends[t.end]}; ${plural(t.renewals, 'renewal')}; seq ${t.firstSeq}–${t.lastSeq}${warn}`;
}

function describeFault(f: FaultRecord): string {
  const span =
    f.endAt === null ? `from ${secExact(f.startAt)}, never healed` : `${secExact(f.startAt)} – ${secExact(f.endAt)} (${n1((f.endAt - f.startAt) / 1000)} s)`;
  return `${f.kind} → ${f.target}: ${span}${f.detail ? ` — ${f.detail}` : ''}`;
}

function describeOp(o: Op): string {
  const when = o.completedAt === null ? `invoked ${secExact(o.invokedAt)}, no completion` : `${secExact(o.invokedAt)} – ${secExact(o.completedAt)}`;
  const bits = [`op ${o.id} ${o.kind}${o.target ? ` ${o.target}` : ''} by ${o.client} via ${o.via}: ${o.outcome}`, when];
  if (o.status !== undefined) bits.push(`status ${o.status}`);
  if (o.node) bits.push(`answered by ${o.node}`);
  if (o.key) bits.push(`key ${o.key}`);
  if (o.detail) bits.push(o.detail);
  return bits.join(' · ');
}

function describeStage(t: StageTransition): string {
  return `${t.rolloutId} attempt ${t.attempt} stage ${t.index}: ${t.from ?? '—'} → ${t.to} at ${secExact(t.at)}${t.by ? ` by ${t.by}` : ''}${t.epoch !== null ? ` at epoch ${t.epoch}` : ''} (seq ${t.seq})`;
}

function describeItem(t: ItemTransition): string {
  const bits = [`${t.runId}/${t.itemId} ${t.to.state} at ${secExact(t.at)}`, t.to.worker ? `worker ${t.to.worker}` : 'no worker', `attempts ${t.to.attempts}`];
  if (t.to.error) bits.push(t.to.error);
  return bits.join(' · ');
}

/** Everything one schedule shows, in one SVG. */
function drawSvg(history: ChaosHistory, violations: readonly Violation[], s: Scale, terms: LeaseTerm[]): string {
  const defs = `<defs>
    <pattern id="hatch-paused" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="5" height="5" fill="#fdf3d8"/><rect width="2" height="5" fill="#e6a700"/></pattern>
  </defs>`;
  const back: string[] = []; // grid and bands, under everything
  const body: string[] = []; // lanes and marks
  const front: string[] = []; // violations, over everything
  let y = 0;

  // Axis labels on top; the grid is drawn once the height is known.
  const tickList = ticks(s.t0, s.t1);
  y += 18;
  const axisTop = y;
  for (const t of tickList)
    body.push(`<text class="tick" x="${s.x(t)}" y="${y - 5}" text-anchor="middle">${esc(t === 0 ? '0' : sec(t).replace('.0 s', ' s'))}</text>`);

  // Phases.
  const p = history.phases;
  const phases: [string, number, number][] = [
    ['faults', 0, p.faultsUntil],
    ['healing', p.faultsUntil, p.healedAt],
    ['quiet', p.healedAt, p.quietUntil],
  ];
  body.push(laneLabel(y + 12, 'phases'));
  for (const [name, a, b] of phases) {
    if (b <= a) continue;
    const x0 = s.x(a);
    const w = s.x(b) - x0;
    const label = `${name} ${sec(a)} – ${sec(b)}`;
    const text = w > label.length * CHAR_W + 8 ? label : w > name.length * CHAR_W + 8 ? name : '';
    body.push(
      `<g class="phase ${name}" data-kind="phase" data-phase="${name}">${title(`${name}: ${secExact(a)} – ${secExact(b)}`)}<rect x="${x0}" y="${y}" width="${w}" height="16" rx="2"/>${
        text ? `<text x="${x0 + w / 2}" y="${y + 12}" text-anchor="middle">${esc(text)}</text>` : ''
      }</g>`,
    );
  }
  y += 22;

  // Fault chips, packed into rows so every label can be read; their bands reach down through every lane.
  const faults = [...history.faults].sort((a, b) => a.startAt - b.startAt);
  const faultTop = y;
  const chipH = 15;
  const extents = faults.map((f) => {
    const x0 = s.x(f.startAt);
    const label = `${f.kind} ${f.target}`;
    return { x0, x1: Math.max(s.x(f.endAt ?? s.t1), x0 + label.length * CHAR_W + 10) };
  });
  const rows = packRows(extents);
  const faultRows = faults.length ? Math.max(...rows) + 1 : 0;
  if (faults.length) body.push(laneLabel(faultTop + 11, 'faults'));
  y += faultRows * (chipH + 3) + (faults.length ? 4 : 0);
  const faultGroups: { f: FaultRecord; row: number }[] = faults.map((f, i) => ({ f, row: rows[i] ?? 0 }));

  // Violations' row.
  const timed = violations.filter((v) => v.at !== null);
  const violationRowY = y;
  if (violations.length) {
    body.push(laneLabel(y + 12, 'violations'));
    y += 22;
  }

  // Node lanes: leader terms and process lifetime.
  const nodeIds = [...history.nodes];
  const outsiders = [...new Set(terms.map((t) => t.holder))].filter((h) => !nodeIds.includes(h));
  const holders = [...nodeIds, ...outsiders];
  const colourOf = new Map(holders.map((h, i) => [h, HOLDER_COLOURS[i % HOLDER_COLOURS.length] ?? '#4e79a7']));
  y += 10;
  body.push(section(y, `Nodes — who held ${LEADER_LEASE}, at which epoch; process lifetime below each`));
  y += 12;
  const laneH = 34;
  const strip = (segs: ProcessSegment[], lane: string, yy: number, h: number) =>
    segs
      .map(
        (g) =>
          `<rect class="proc ${token(g.state)}" data-kind="process" data-lane="${esc(lane)}" data-state="${esc(g.state)}" x="${s.x(g.from)}" y="${yy}" width="${Math.max(1, s.x(g.to) - s.x(g.from))}" height="${h}">${title(
            `${lane} ${g.state}: ${secExact(g.from)} – ${secExact(g.to)}`,
          )}</rect>`,
      )
      .join('');
  // Where a process could not run on time (stalls.ts), over its lifetime strip.
  const stallMarks = (lane: string, yy: number, h: number) =>
    (history.stalls ?? [])
      .filter((x) => x.process === lane)
      .map(
        (x) =>
          `<rect class="stall" data-kind="stall" data-lane="${esc(lane)}" x="${s.x(x.at)}" y="${yy}" width="${Math.max(1, s.x(x.at + x.ms) - s.x(x.at))}" height="${h}">${title(`${lane} stalled ${secExact(x.ms)} from ${secExact(x.at)} (pid ${x.pid})`)}</rect>`,
      )
      .join('');
  for (const node of holders) {
    const own = terms.filter((t) => t.holder === node);
    const led = own.reduce((sum, t) => sum + (t.to - t.from), 0);
    const sub = nodeIds.includes(node) ? (own.length ? `led ${n1(led / 1000)} s · ${plural(own.length, 'term')}` : 'never led') : 'holder not among the nodes';
    const parts: string[] = [`<rect class="lane-bg" x="${LEFT}" y="${y}" width="${PLOT}" height="${laneH}"/>`, laneLabel(y + 15, node, sub)];
    for (const t of own) {
      const x0 = s.x(t.from);
      const w = Math.max(2, s.x(t.to) - x0);
      const bad = t.anomaly !== null;
      const labels =
        t.anomaly === 'backwards'
          ? [`⚠ e${t.epoch}: epoch went back from e${t.previousEpoch}`, `⚠ e${t.epoch} ↓ from e${t.previousEpoch}`, `⚠ e${t.epoch}`]
          : t.anomaly === 'not-advanced'
            ? [`⚠ e${t.epoch}: epoch reused by a new holder`, `⚠ e${t.epoch} reused`, `⚠ e${t.epoch}`]
            : [`e${t.epoch}`];
      const inside = labels.find((l) => w > l.length * CHAR_W + 8);
      const fits = inside !== undefined;
      const label = inside ?? labels[labels.length - 1] ?? '';
      const cls = `lease${bad ? ` anomaly ${token(t.anomaly ?? '')}` : ''} end-${t.end}`;
      parts.push(
        `<g class="${cls}" data-kind="lease" data-lane="${esc(node)}" data-holder="${esc(t.holder)}" data-epoch="${esc(t.epoch)}" data-from="${esc(t.from)}" data-to="${esc(t.to)}" data-end="${esc(t.end)}">${title(describeTerm(t))}` +
          `<rect x="${x0}" y="${y + 5}" width="${w}" height="17" rx="3" fill="${bad ? '#dc2626' : (colourOf.get(node) ?? '#4e79a7')}"${bad ? ' stroke="#7f1d1d" stroke-width="1.5"' : ''}/>` +
          (t.end === 'expired' ? `<line class="expiry" x1="${x0 + w}" x2="${x0 + w}" y1="${y + 3}" y2="${y + 24}"/>` : '') +
          (fits
            ? `<text class="bar-label" x="${x0 + w / 2}" y="${y + 17.5}" text-anchor="middle">${esc(label)}</text>`
            : bad
              ? // Too narrow to hold its warning: the warning goes beside it, on whichever side has room.
                x0 + w + 4 + label.length * CHAR_W < WIDTH
                ? `<text class="bar-label outside" x="${x0 + w + 4}" y="${y + 17.5}">${esc(label)}</text>`
                : `<text class="bar-label outside" x="${x0 - 4}" y="${y + 17.5}" text-anchor="end">${esc(label)}</text>`
              : '') +
          `</g>`,
      );
    }
    parts.push(strip(processSegments(history.processes, node, s.t1), node, y + 26, 4), stallMarks(node, y + 26, 4));
    body.push(`<g class="lane node" data-lane="${esc(node)}" data-lane-kind="node">${parts.join('')}</g>`);
    y += laneH + 4;
  }

  // Workers and other processes: lifetimes only.
  const drawProcesses = (names: readonly string[], kind: string, heading: string) => {
    if (!names.length) return;
    y += 8;
    body.push(section(y, heading));
    y += 10;
    for (const name of names) {
      body.push(
        `<g class="lane ${kind}" data-lane="${esc(name)}" data-lane-kind="${kind}">${laneLabel(y + 11, name)}${strip(processSegments(history.processes, name, s.t1), name, y + 5, 6)}${stallMarks(name, y + 5, 6)}</g>`,
      );
      y += 17;
    }
  };
  drawProcesses(history.workers, 'worker', 'Workers — process lifetime');
  const named = new Set([...holders, ...history.workers]);
  const others = [...new Set(history.processes.map((ps) => ps.process))].filter((n) => !named.has(n));
  drawProcesses(others, 'infra', 'Store, proxies and functions — process lifetime');

  // Rollouts: promotions and rollbacks.
  const marks = stageMarks(history.store.stageTransitions);
  const allStages = [...history.store.stageTransitions].sort((a, b) => a.at - b.at);
  const rolloutIds = [...new Set(allStages.map((t) => t.rolloutId))];
  if (rolloutIds.length) {
    y += 8;
    body.push(section(y, 'Rollouts — ▲ stage promoted, ▼ stage rolled back'));
    y += 10;
    // Past a dozen rollouts one shared row reads better than a wall of labels.
    const rowsOf: { id: string | null; label: string }[] =
      rolloutIds.length > 12 ? [{ id: null, label: `${rolloutIds.length} rollouts` }] : rolloutIds.map((id) => ({ id, label: id }));
    for (const row of rowsOf) {
      const own = allStages.filter((t) => row.id === null || t.rolloutId === row.id);
      const ownMarks = marks.filter((t) => row.id === null || t.rolloutId === row.id);
      const first = own[0]?.at ?? 0;
      const last = own[own.length - 1]?.at ?? first;
      const promoted = ownMarks.filter((t) => t.to === 'promoted').length;
      const rolledBack = ownMarks.length - promoted;
      const sub = [promoted ? `${promoted} promoted` : '', rolledBack ? `${rolledBack} rolled back` : ''].filter(Boolean).join(' · ') || 'no promotions';
      const parts = [
        laneLabel(y + 11, row.label, sub),
        `<line class="rollout-line" x1="${s.x(first)}" x2="${Math.max(s.x(last), s.x(first) + 1)}" y1="${y + 12}" y2="${y + 12}"/>`,
      ];
      for (const t of ownMarks) {
        const x = s.x(t.at);
        const cy = y + 12;
        const shape =
          t.to === 'promoted'
            ? `<path d="M${x},${cy - 7} L${x + 6},${cy + 4} L${x - 6},${cy + 4} Z"/>`
            : `<path d="M${x},${cy + 7} L${x + 6},${cy - 4} L${x - 6},${cy - 4} Z"/>`;
        const cls = t.to === 'promoted' ? 'promotion' : 'rollback';
        parts.push(`<g class="mark ${cls}" data-kind="${cls}" data-lane="${esc(t.rolloutId)}" data-at="${esc(t.at)}">${title(describeStage(t))}${shape}</g>`);
      }
      body.push(`<g class="lane rollout" data-lane="${esc(row.id ?? 'rollouts')}" data-lane-kind="rollout">${parts.join('')}</g>`);
      y += 26;
    }
  }

  // Work runs: item completions, as ticks or, when there are many, as a histogram.
  const completions = itemCompletions(history.store.itemTransitions);
  const runIds = [...new Set([...history.store.runs.map((r) => r.id), ...completions.map((c) => c.runId)])];
  if (runIds.length) {
    y += 8;
    body.push(section(y, 'Work runs — item completions: done above the line, failed below'));
    y += 10;
    for (const runId of runIds) {
      const own = completions.filter((c) => c.runId === runId);
      const done = own.filter((c) => c.to.state === 'done');
      const failed = own.filter((c) => c.to.state === 'failed');
      const total = history.store.runs.find((r) => r.id === runId)?.items;
      const sub = `${done.length} done${failed.length ? ` · ${failed.length} failed` : ''}${total !== undefined ? ` of ${total}` : ''}`;
      const mid = y + 15;
      const parts = [laneLabel(y + 12, runId, sub), `<line class="baseline" x1="${LEFT}" x2="${LEFT + PLOT}" y1="${mid}" y2="${mid}"/>`];
      if (own.length <= MAX_ITEM_TICKS) {
        for (const c of own) {
          const x = s.x(c.at);
          const ok = c.to.state === 'done';
          parts.push(
            `<g class="mark item ${ok ? 'done' : 'failed'}" data-kind="item-${ok ? 'done' : 'failed'}" data-lane="${esc(runId)}" data-at="${esc(c.at)}">${title(describeItem(c))}<rect x="${x - 1}" y="${ok ? mid - 11 : mid + 1}" width="2" height="${ok ? 10 : 10}"/></g>`,
          );
        }
      } else {
        const bins = Math.round(PLOT / 5);
        const d = histogram(
          done.map((c) => c.at),
          s.t0,
          s.t1,
          bins,
        );
        const f = histogram(
          failed.map((c) => c.at),
          s.t0,
          s.t1,
          bins,
        );
        const top = Math.max(1, ...d, ...f);
        const bw = PLOT / bins;
        for (let i = 0; i < bins; i++) {
          const dn = d[i] ?? 0;
          const fl = f[i] ?? 0;
          if (!dn && !fl) continue;
          const a = s.t0 + ((s.t1 - s.t0) * i) / bins;
          const b = s.t0 + ((s.t1 - s.t0) * (i + 1)) / bins;
          const x = LEFT + i * bw;
          const hd = (dn / top) * 12;
          const hf = (fl / top) * 12;
          parts.push(
            `<g class="bin items" data-kind="item-bin" data-lane="${esc(runId)}" data-done="${dn}" data-failed="${fl}">${title(`${runId}: ${sec(a)} – ${sec(b)}: ${dn} done, ${fl} failed`)}` +
              (dn ? `<rect class="done" x="${x + 0.5}" y="${mid - hd}" width="${Math.max(1, bw - 1)}" height="${hd}"/>` : '') +
              (fl ? `<rect class="failed" x="${x + 0.5}" y="${mid}" width="${Math.max(1, bw - 1)}" height="${hf}"/>` : '') +
              `</g>`,
          );
        }
      }
      body.push(`<g class="lane run" data-lane="${esc(runId)}" data-lane-kind="run">${parts.join('')}</g>`);
      y += 32;
    }
  }

  // Clients: what was answered (a faint histogram) and what was refused or never answered.
  if (history.ops.length) {
    y += 8;
    body.push(section(y, 'Clients — ops answered (grey histogram), × refused, ◆ no answer (line: until given up)'));
    y += 10;
    const troubled = troubledOps(history.ops);
    const ok = history.ops.filter((o) => o.outcome === 'ok');
    const failedN = troubled.filter((o) => o.outcome === 'failed').length;
    const unknownN = troubled.length - failedN;
    const parts = [laneLabel(y + 12, 'client ops', `${failedN} refused · ${unknownN} unanswered`)];
    // Bins of about a second where the picture has room: narrower ones turn a steady client into a barcode.
    const bins = Math.max(20, Math.min(Math.round(PLOT / 6), Math.round((s.t1 - s.t0) / 1_000)));
    const counts = histogram(
      ok.map((o) => o.completedAt ?? o.invokedAt),
      s.t0,
      s.t1,
      bins,
    );
    const top = Math.max(1, ...counts);
    const bw = PLOT / bins;
    const base = y + 26;
    counts.forEach((c, i) => {
      if (!c) return;
      const h = (c / top) * 20;
      parts.push(
        `<rect class="bin ops-ok" x="${LEFT + i * bw + 0.5}" y="${base - h}" width="${Math.max(1, bw - 1)}" height="${h}">${title(`${c} ops answered ok, ${sec(s.t0 + ((s.t1 - s.t0) * i) / bins)} – ${sec(s.t0 + ((s.t1 - s.t0) * (i + 1)) / bins)}`)}</rect>`,
      );
    });
    if (troubled.length <= MAX_OP_MARKS) {
      for (const o of troubled) {
        if (o.outcome === 'failed') {
          const x = s.x(o.completedAt ?? o.invokedAt);
          const cy = y + 9;
          parts.push(
            `<g class="mark op failed" data-kind="op-failed" data-lane="${esc(o.client)}" data-at="${esc(o.completedAt ?? o.invokedAt)}">${title(describeOp(o))}<path d="M${x - 4},${cy - 4} L${x + 4},${cy + 4} M${x + 4},${cy - 4} L${x - 4},${cy + 4}"/><rect class="hit" x="${x - 5}" y="${cy - 5}" width="10" height="10"/></g>`,
          );
        } else {
          const x0 = s.x(o.invokedAt);
          const x1 = s.x(o.completedAt ?? s.t1);
          const cy = y + 18;
          parts.push(
            `<g class="mark op unknown" data-kind="op-unknown" data-lane="${esc(o.client)}" data-at="${esc(o.invokedAt)}">${title(describeOp(o))}<line x1="${x0}" x2="${Math.max(x1, x0 + 1)}" y1="${cy}" y2="${cy}"/><path d="M${x0},${cy - 5} L${x0 + 5},${cy} L${x0},${cy + 5} L${x0 - 5},${cy} Z"/></g>`,
          );
        }
      }
    } else {
      const f = histogram(
        troubled.filter((o) => o.outcome === 'failed').map((o) => o.completedAt ?? o.invokedAt),
        s.t0,
        s.t1,
        bins,
      );
      const u = histogram(
        troubled.filter((o) => o.outcome === 'unknown').map((o) => o.invokedAt),
        s.t0,
        s.t1,
        bins,
      );
      const topT = Math.max(1, ...f, ...u);
      for (let i = 0; i < bins; i++) {
        const fl = f[i] ?? 0;
        const un = u[i] ?? 0;
        if (!fl && !un) continue;
        const x = LEFT + i * bw;
        const hf = (fl / topT) * 10;
        const hu = (un / topT) * 10;
        parts.push(
          `<g class="bin ops-troubled" data-kind="op-bin" data-failed="${fl}" data-unknown="${un}">${title(`${sec(s.t0 + ((s.t1 - s.t0) * i) / bins)}: ${fl} refused, ${un} unanswered`)}` +
            (fl ? `<rect class="failed" x="${x + 0.5}" y="${y + 14 - hf}" width="${Math.max(1, bw - 1)}" height="${hf}"/>` : '') +
            (un ? `<rect class="unknown" x="${x + 0.5}" y="${y + 14}" width="${Math.max(1, bw - 1)}" height="${hu}"/>` : '') +
            `</g>`,
        );
      }
    }
    body.push(`<g class="lane ops" data-lane="client-ops" data-lane-kind="ops">${parts.join('')}</g>`);
    y += 34;
  }

  const lanesBottom = y;
  y += 6;
  // Axis labels again at the bottom, for tall pictures.
  for (const t of tickList)
    body.push(`<text class="tick" x="${s.x(t)}" y="${y + 10}" text-anchor="middle">${esc(t === 0 ? '0' : sec(t).replace('.0 s', ' s'))}</text>`);
  y += 18;
  const height = y;

  for (const t of tickList) back.push(`<line class="grid" x1="${s.x(t)}" x2="${s.x(t)}" y1="${axisTop}" y2="${lanesBottom}"/>`);
  for (const { f, row } of faultGroups) {
    const x0 = s.x(f.startAt);
    const x1 = s.x(f.endAt ?? s.t1);
    const w = Math.max(2, x1 - x0);
    const cy = faultTop + row * (chipH + 3);
    const colour = faultColour(f.kind);
    back.push(
      `<g class="fault ${token(f.kind)}${f.endAt === null ? ' unhealed' : ''}" data-kind="fault" data-fault="${esc(f.kind)}" data-target="${esc(f.target)}" data-from="${esc(f.startAt)}" data-to="${esc(f.endAt ?? s.t1)}">${title(describeFault(f))}` +
        `<rect class="band" x="${x0}" y="${faultTop}" width="${w}" height="${lanesBottom - faultTop}" fill="${colour}"/>` +
        `<rect class="chip" x="${x0}" y="${cy}" width="${w}" height="${chipH}" rx="2" fill="${colour}" stroke="${colour}"/>` +
        `<text class="chip-label" x="${x0 + 4}" y="${cy + 11}">${esc(`${f.kind} ${f.target}`)}</text></g>`,
    );
  }
  for (const v of timed) {
    const x = s.x(v.at ?? 0);
    const cy = violationRowY + 10;
    front.push(
      `<g class="mark violation ${token(v.kind)}" data-kind="violation" data-invariant="${esc(v.invariant)}" data-at="${esc(v.at)}">${title(`${v.invariant} (${v.kind}) at ${secExact(v.at ?? 0)}: ${v.message}`)}` +
        `<line class="violation-line" x1="${x}" x2="${x}" y1="${cy + 8}" y2="${lanesBottom}"/>` +
        `<circle cx="${x}" cy="${cy}" r="8"/><text x="${x}" y="${cy + 4}" text-anchor="middle">!</text></g>`,
    );
  }
  const cursor = `<g id="cursor" visibility="hidden"><line x1="0" x2="0" y1="${axisTop}" y2="${lanesBottom}"/></g>`;
  return `<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="chaos timeline"${attr('data-t0', s.t0)}${attr('data-t1', s.t1)}${attr('data-left', LEFT)}${attr('data-plot', PLOT)}>${defs}<g class="back">${back.join('')}</g><g class="body">${body.join('')}</g><g class="front">${front.join('')}</g>${cursor}</svg>`;
}

function legend(history: ChaosHistory, terms: LeaseTerm[]): string {
  const holders = [...history.nodes, ...[...new Set(terms.map((t) => t.holder))].filter((h) => !history.nodes.includes(h))];
  const sw = (style: string, cls = '') => `<span class="swatch ${cls}" style="${style}"></span>`;
  const items: string[] = [];
  holders.forEach((h, i) => items.push(`<span class="key">${sw(`background:${HOLDER_COLOURS[i % HOLDER_COLOURS.length]}`)}${esc(h)} leads</span>`));
  items.push(`<span class="key">${sw('', 'bad')}epoch went backwards</span>`);
  const kinds = [...new Set(history.faults.map((f) => f.kind))];
  const faultKeys = kinds.map((k) => `<span class="key" data-kind="legend-fault">${sw(`background:${faultColour(k)};opacity:.45`)}${esc(k)}</span>`);
  const proc = [
    `<span class="key">${sw('', 'p-alive')}alive</span>`,
    `<span class="key">${sw('', 'p-killed')}killed / crashed</span>`,
    `<span class="key">${sw('', 'p-paused')}paused</span>`,
    `<span class="key">${sw('', 'p-stopped')}stopped</span>`,
  ];
  return `<div class="legend"><div><span class="legend-title">leader</span>${items.join('')}</div>${
    faultKeys.length ? `<div><span class="legend-title">faults</span>${faultKeys.join('')}</div>` : ''
  }<div><span class="legend-title">processes</span>${proc.join('')}</div></div>`;
}

function summaryOf(history: ChaosHistory, violations: readonly Violation[], terms: LeaseTerm[], t1: number): string[] {
  const lines: string[] = [];
  if (!terms.length) lines.push(`Nobody held ${LEADER_LEASE}.`);
  else if (terms.length <= 6)
    lines.push(
      `Leaders: ${terms.map((t) => `${t.holder} e${t.epoch}${t.anomaly === 'backwards' ? ' (epoch went backwards!)' : t.anomaly === 'not-advanced' ? ' (epoch reused!)' : ''} ${sec(t.from)}–${sec(t.to)}`).join(' → ')}.`,
    );
  else {
    const epochs = terms.map((t) => t.epoch);
    lines.push(`${terms.length} leader terms across ${new Set(terms.map((t) => t.holder)).size} nodes, epochs ${Math.min(...epochs)}–${Math.max(...epochs)}.`);
  }
  const bad = terms.filter((t) => t.anomaly !== null);
  if (bad.length)
    lines.push(`${plural(bad.length, 'term')} with an epoch that did not advance: ${bad.map((t) => `${t.holder} e${t.epoch} at ${sec(t.from)}`).join(', ')}.`);
  if (terms.length) {
    let longest = { gap: 0, from: 0, to: 0 };
    for (let i = 1; i <= terms.length; i++) {
      const from = terms[i - 1]?.to ?? 0;
      const to = terms[i]?.from ?? t1;
      if (to - from > longest.gap) longest = { gap: to - from, from, to };
    }
    if (longest.gap > 0) lines.push(`Longest time without a leader: ${n1(longest.gap / 1000)} s (${sec(longest.from)} – ${sec(longest.to)}).`);
  }
  const st = stageMarks(history.store.stageTransitions);
  const items = itemCompletions(history.store.itemTransitions);
  const promoted = st.filter((t) => t.to === 'promoted').length;
  const doneN = items.filter((c) => c.to.state === 'done').length;
  lines.push(
    `${plural(promoted, 'promotion')}, ${plural(st.length - promoted, 'rollback')}; ${doneN} items done, ${items.length - doneN} failed in ${plural(new Set([...history.store.runs.map((r) => r.id), ...items.map((c) => c.runId)]).size, 'run')}.`,
  );
  const stalls = history.stalls ?? [];
  if (stalls.length) {
    const by = new Map<string, number>();
    for (const x of stalls) by.set(x.process, (by.get(x.process) ?? 0) + x.ms);
    const worst = [...by].sort((a, b) => b[1] - a[1]).slice(0, 3);
    lines.push(`Scheduling stalls in ${plural(by.size, 'process', 'processes')}; the most: ${worst.map(([p, ms]) => `${p} ${n1(ms / 1000)} s`).join(', ')}.`);
  }
  if (violations.length) {
    const first = [...violations].filter((v) => v.at !== null).sort((a, b) => (a.at ?? 0) - (b.at ?? 0))[0];
    lines.push(
      `${plural(violations.length, 'violation')} (${[...new Set(violations.map((v) => v.invariant))].join(', ')})${first ? `; the first at ${sec(first.at ?? 0)}` : ''}.`,
    );
  } else lines.push('No violations.');
  return lines;
}

const CSS = `
  :root { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1f24; background: #f6f7f9; }
  body { margin: 0 auto; max-width: ${WIDTH + 40}px; padding: 1.25rem 1.25rem 2rem; }
  h1 { font-size: 1.25rem; margin: 0 0 .2rem; font-weight: 600; }
  h2 { font-size: 1rem; margin: 1.4rem 0 .5rem; }
  .muted { color: #5c6670; font-size: .85rem; }
  .meta { color: #5c6670; font-size: .9rem; margin-bottom: .35rem; }
  .verdict { display: inline-block; padding: .05rem .5rem; border-radius: 3px; font-size: .85rem; font-weight: 600; margin-right: .4rem; }
  .verdict.ok { background: #d7f2dc; color: #14532d; } .verdict.bad { background: #fde2e1; color: #7f1d1d; }
  #summary { margin: .3rem 0 0; padding-left: 1.1rem; font-size: .9rem; line-height: 1.45; }
  .card { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: .6rem .6rem .4rem; margin: .75rem 0; overflow-x: auto; }
  #readout { font-size: .85rem; color: #374151; min-height: 1.3em; margin: 0 0 .3rem .4rem; font-variant-numeric: tabular-nums; }
  svg { display: block; font-size: 11px; }
  svg .tick { fill: #6b7280; font-size: 10px; font-variant-numeric: tabular-nums; }
  svg .grid { stroke: #eef0f2; stroke-width: 1; }
  svg .section { fill: #6b7280; font-size: 10.5px; font-weight: 600; letter-spacing: .02em; }
  svg .section-rule { stroke: #e5e7eb; }
  svg .lane-label { fill: #1f2937; font-size: 12px; }
  svg .lane-sub { fill: #8a94a0; font-size: 10px; }
  svg .lane-bg { fill: transparent; }
  svg .phase rect { stroke: none; } svg .phase text { font-size: 10.5px; }
  svg .phase.faults rect { fill: #fbe4e2; } svg .phase.faults text { fill: #8a2a24; }
  svg .phase.healing rect { fill: #fbf0d5; } svg .phase.healing text { fill: #7a5510; }
  svg .phase.quiet rect { fill: #e3f3e6; } svg .phase.quiet text { fill: #1f5130; }
  svg .fault .band { opacity: .09; }
  svg .fault .chip { fill-opacity: .22; stroke-opacity: .7; }
  svg .fault .chip-label { fill: #1f2937; font-size: 10.5px; }
  svg .fault.unhealed .chip { stroke-dasharray: 3 2; }
  svg .fault:hover .band { opacity: .2; }
  svg .lease rect { transition: opacity .1s; } svg .lease:hover rect { opacity: .85; }
  svg .bar-label { fill: #fff; font-size: 10.5px; font-weight: 600; }
  svg .bar-label.outside { fill: #b91c1c; }
  svg .expiry { stroke: #9ca3af; stroke-width: 1; stroke-dasharray: 2 2; }
  svg .proc.alive { fill: #b9c3cc; } svg .proc.killed, svg .proc.crashed { fill: #e04f4f; }
  svg .stall { fill: #b91c1c; opacity: .75; }
  svg .proc.paused { fill: url(#hatch-paused); } svg .proc.stopped, svg .proc.exited { fill: #e5e7eb; }
  svg .rollout-line, svg .baseline { stroke: #e1e5ea; stroke-width: 1; }
  svg .rollout-line { stroke: #cfd5dc; stroke-width: 2; }
  svg .mark.promotion path { fill: #2f9e57; }
  svg .mark.rollback path { fill: #c2410c; }
  svg .mark.item.done rect { fill: #5cb87a; } svg .mark.item.failed rect { fill: #c2410c; }
  svg .bin.items .done { fill: #5cb87a; } svg .bin.items .failed { fill: #c2410c; }
  svg .bin.ops-ok { fill: #dde2e8; }
  svg .bin.ops-troubled .failed { fill: #c2410c; } svg .bin.ops-troubled .unknown { fill: #7c3aed; }
  svg .mark.op.failed path { stroke: #c2410c; stroke-width: 2; fill: none; } svg .mark .hit { fill: transparent; }
  svg .mark.op.unknown line { stroke: #7c3aed; stroke-width: 2; opacity: .5; } svg .mark.op.unknown path { fill: #7c3aed; }
  svg .mark.violation circle { fill: #dc2626; } svg .mark.violation text { fill: #fff; font-weight: 700; font-size: 12px; }
  svg .violation-line { stroke: #dc2626; stroke-width: 1.5; stroke-dasharray: 4 3; opacity: .75; }
  svg #cursor line { stroke: #111827; stroke-width: 1; opacity: .35; pointer-events: none; }
  .legend { display: flex; flex-direction: column; gap: .3rem; font-size: .8rem; color: #374151; margin: .4rem .4rem .2rem; }
  .legend-title { display: inline-block; width: 6.5rem; color: #6b7280; text-transform: uppercase; font-size: .7rem; letter-spacing: .06em; }
  .key { display: inline-flex; align-items: center; gap: .3rem; margin-right: .9rem; }
  .swatch { display: inline-block; width: 14px; height: 10px; border-radius: 2px; }
  .swatch.bad { background: #dc2626; outline: 1px solid #7f1d1d; }
  .swatch.p-alive { background: #b9c3cc; height: 5px; } .swatch.p-killed { background: #e04f4f; height: 5px; }
  .swatch.p-paused { background: repeating-linear-gradient(45deg, #e6a700 0 2px, #fdf3d8 2px 4px); height: 5px; } .swatch.p-stopped { background: #e5e7eb; height: 5px; }
  #violations { list-style: none; padding: 0; margin: 0; }
  #violations > li { background: #fff; border: 1px solid #f3c5c2; border-left: 4px solid #dc2626; border-radius: 6px; padding: .55rem .8rem; margin-bottom: .6rem; }
  #violations .head { font-weight: 600; } #violations .head .at { color: #6b7280; font-weight: 400; margin-left: .4rem; }
  #violations .message { margin: .2rem 0 .35rem; }
  #violations ol { margin: 0; padding-left: 1.4rem; font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; color: #374151; }
  .none { color: #14532d; }
  details { margin: .5rem 0; font-size: .85rem; } summary { cursor: pointer; color: #374151; }
  table { border-collapse: collapse; width: 100%; font-size: .82rem; margin-top: .4rem; background: #fff; }
  th, td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid #eef0f2; font-variant-numeric: tabular-nums; }
  th { font-weight: 600; color: #5c6670; }
`;

/**
 * Reads the picture's own attributes, so it works the same on a saved file:
 * the moment under the pointer, who held the lease then, and what was broken.
 */
const SCRIPT = `
(() => {
  const svg = document.getElementById('timeline');
  const out = document.getElementById('readout');
  const cursor = document.getElementById('cursor');
  if (!svg || !out || !cursor) return;
  const idle = out.textContent;
  const t0 = Number(svg.dataset.t0), t1 = Number(svg.dataset.t1), left = Number(svg.dataset.left), plot = Number(svg.dataset.plot);
  const read = (sel) => Array.from(svg.querySelectorAll(sel)).map((el) => ({ el, from: Number(el.dataset.from), to: Number(el.dataset.to) }));
  const terms = read('[data-kind="lease"]');
  const faults = read('[data-kind="fault"]');
  svg.addEventListener('mousemove', (e) => {
    const box = svg.getBoundingClientRect();
    const x = (e.clientX - box.left) * (svg.viewBox.baseVal.width / box.width);
    if (x < left || x > left + plot) { cursor.setAttribute('visibility', 'hidden'); out.textContent = idle; return; }
    const t = t0 + ((x - left) / plot) * (t1 - t0);
    cursor.setAttribute('transform', 'translate(' + x + ',0)');
    cursor.setAttribute('visibility', 'visible');
    const lead = terms.filter((r) => r.from <= t && t < r.to).map((r) => r.el.dataset.holder + ' (epoch ' + r.el.dataset.epoch + ')');
    const broken = faults.filter((r) => r.from <= t && t < r.to).map((r) => r.el.dataset.fault + ' → ' + r.el.dataset.target);
    out.textContent = (t / 1000).toFixed(1) + ' s · leader: ' + (lead.join(', ') || 'none') + ' · faults: ' + (broken.join(', ') || 'none');
  });
  svg.addEventListener('mouseleave', () => { cursor.setAttribute('visibility', 'hidden'); out.textContent = idle; });
})();
`;

/** The whole page for one schedule. */
export function renderTimeline(history: ChaosHistory, violations: readonly Violation[]): string {
  const { t0, t1 } = timeRange(history, violations);
  const s = scaleOf(t0, t1);
  const terms = leaderIntervals(history.store.leaseChanges, LEADER_LEASE, t1);
  const svg = drawSvg(history, violations, s, terms);
  const troubled = troubledOps(history.ops);
  const failedN = troubled.filter((o) => o.outcome === 'failed').length;
  const heading = `Chaos timeline · schedule ${history.schedule} · seed ${history.seed}`;
  const meta = [
    `topology ${history.topology}`,
    history.variant ? `variant ${history.variant}` : 'no variant',
    `${sec(t1 - Math.min(0, t0))}`,
    `${plural(history.nodes.length, 'node')}, ${plural(history.workers.length, 'worker')}`,
    `${plural(history.ops.length, 'op')} (${failedN} refused, ${troubled.length - failedN} unanswered)`,
    plural(history.faults.length, 'fault'),
    plural(violations.length, 'violation'),
  ];
  const verdict = violations.length
    ? `<span class="verdict bad">${esc(plural(violations.length, 'violation'))}</span>`
    : `<span class="verdict ok">no violations</span>`;
  const vlist = violations.length
    ? `<ol id="violations">${violations
        .map(
          (v, i) =>
            `<li class="violation" data-invariant="${esc(v.invariant)}" id="violation-${i + 1}"><div class="head">${esc(v.invariant)} <span class="kind">(${esc(v.kind)})</span><span class="at">${
              v.at === null ? 'no time' : esc(`at ${secExact(v.at)}`)
            }</span></div><div class="message">${esc(v.message)}</div>${v.evidence.length ? `<ol class="evidence">${v.evidence.map((e) => `<li>${esc(e)}</li>`).join('')}</ol>` : '<div class="muted">no evidence recorded</div>'}</li>`,
        )
        .join('')}</ol>`
    : `<p class="none" id="violations-none">The checker found no violations.</p>`;
  const faultRows = [...history.faults]
    .sort((a, b) => a.startAt - b.startAt)
    .map(
      (f) =>
        `<tr><td>${esc(f.kind)}</td><td>${esc(f.target)}</td><td>${esc(secExact(f.startAt))}</td><td>${f.endAt === null ? 'never healed' : esc(secExact(f.endAt))}</td><td>${esc(f.detail ?? '')}</td></tr>`,
    )
    .join('');
  const termRows = terms
    .map(
      (t) =>
        `<tr${t.anomaly ? ' class="anomaly"' : ''}><td>${esc(t.holder)}</td><td>${esc(t.epoch)}${t.anomaly ? ` ⚠ ${esc(t.anomaly)}` : ''}</td><td>${esc(secExact(t.from))}</td><td>${esc(secExact(t.to))}</td><td>${esc(t.end)}</td><td>${t.renewals}</td></tr>`,
    )
    .join('');
  const opRows = troubled
    .map(
      (o) =>
        `<tr><td>${esc(secExact(o.invokedAt))}</td><td>${esc(o.client)}</td><td>${esc(o.kind)}</td><td>${esc(o.via)}</td><td>${esc(o.outcome)}</td><td>${esc(o.status ?? '')}</td><td>${esc(o.detail ?? '')}</td></tr>`,
    )
    .join('');

  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(heading)}</title>
<style>${CSS}</style>
</head>
<body>
<h1 id="title">${esc(heading)}</h1>
<div class="meta" id="meta">${verdict}${esc(meta.join(' · '))}</div>
<ul id="summary">${summaryOf(history, violations, terms, t1)
    .map((l) => `<li>${esc(l)}</li>`)
    .join('')}</ul>
<div class="card">
<div id="readout">Point at the picture for the leader and the faults at that moment; every bar and mark has a tooltip.</div>
${svg}
${legend(history, terms)}
</div>
<h2>Violations</h2>
${vlist}
<details><summary>${esc(plural(terms.length, 'leader term'))}</summary><table id="terms"><thead><tr><th>holder</th><th>epoch</th><th>from</th><th>to</th><th>ended</th><th>renewals</th></tr></thead><tbody>${termRows}</tbody></table></details>
<details><summary>${esc(plural(history.faults.length, 'fault'))}</summary><table id="faults"><thead><tr><th>kind</th><th>target</th><th>from</th><th>to</th><th>detail</th></tr></thead><tbody>${faultRows}</tbody></table></details>
<details><summary>${esc(`${plural(troubled.length, 'op')} refused or unanswered`)}</summary><table id="ops"><thead><tr><th>invoked</th><th>client</th><th>kind</th><th>via</th><th>outcome</th><th>status</th><th>detail</th></tr></thead><tbody>${opRows}</tbody></table></details>
<script>${SCRIPT}</script>
</body>
</html>
`;
}
