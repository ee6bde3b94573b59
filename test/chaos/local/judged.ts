import type { SeriesFunction } from '../../support/fake-prometheus.js';
import { Rng } from '../rng.js';

/**
 * The judged gates of a chaos schedule: rollouts whose stages hold
 * mann-whitney, relative and sequential-rate gates reading the harness's
 * Prometheus-compatible answerer (test/support/fake-prometheus.ts), whose
 * series are a function of the version asked about and the time alone:
 *
 *   chaos_latency_ms{version}       stable v1: 100–120 ms, drawn per second from a seeded hash;
 *                                   `…-same`: the stable series one second on (the same
 *                                   distribution, never the same points); `…-slow`: twice it
 *   chaos_requests_total{version}   per second: v1 450, a canary 50 (a 10 % split)
 *   chaos_errors_total{version}     per second: v1 9 (2 %); `…-same` 1 (2 %); `…-bad` 5 (10 %)
 *
 * So a `-same` canary passes every judged reading once it has enough data
 * and completes; a `-slow` or `-bad` one fails and rolls back. The checker
 * judges each kept reading again (promotion-judged-pass, judged-reading-agrees).
 */

export const STABLE = 'v1';

const latency = (t: number) => 100 + Math.round(200 * new Rng(`chaos-latency/${Math.round(t)}`).next()) / 10;

export const chaosSeries: SeriesFunction = (query, t) => {
  const version = /version="([^"]*)"/.exec(query)?.[1];
  const metric = /(chaos_[a-z_]+)/.exec(query)?.[1];
  if (version === undefined || metric === undefined) return undefined;
  const stable = version === STABLE;
  if (metric === 'chaos_latency_ms') return stable ? latency(t) : version.endsWith('-slow') ? 2 * latency(t) : latency(t + 1);
  if (metric === 'chaos_requests_total') return stable ? 450 : 50;
  if (metric === 'chaos_errors_total') return stable ? 9 : version.endsWith('-bad') ? 5 : 1;
  return undefined;
};

export type JudgedKind = 'mw-same' | 'mw-slow' | 'seq-same' | 'seq-bad';

/** What each judged rollout is: its canary's version, the gates of its stages, and what it should do. */
const KINDS: Record<JudgedKind, { version: string; expect: 'promote' | 'rollback'; everyStage: boolean; gates: (address: string) => unknown[] }> = {
  // A canary as good as the stable version, on mann-whitney, beside a dry-run relative gate too strict to pass it often.
  'mw-same': {
    version: 'v2-same',
    expect: 'promote',
    everyStage: true,
    gates: (a) => [mannWhitney(a), { ...relative(a, 0.02), name: 'latency-trial', dryRun: true }],
  },
  'mw-slow': { version: 'v2-slow', expect: 'rollback', everyStage: false, gates: (a) => [mannWhitney(a)] },
  // As good as the stable version on errors, two sequential passes in a row, and a relative latency gate.
  'seq-same': { version: 'v2-same', expect: 'promote', everyStage: true, gates: (a) => [{ ...sequential(a), consecutiveSuccesses: 2 }, relative(a, 0.5)] },
  'seq-bad': { version: 'v2-bad', expect: 'rollback', everyStage: false, gates: (a) => [sequential(a)] },
};
export const JUDGED_KINDS = Object.keys(KINDS) as JudgedKind[];

/** Short intervals and windows: a judged stage decides within seconds. Readings short of data are inconclusive, which the limit allows. */
const read = (address: string) => ({ type: 'prometheus', address, intervalSeconds: 1, inconclusiveLimit: 30 }) as const;
const latencyQuery = 'chaos_latency_ms{version="{{version}}"}';

function mannWhitney(address: string) {
  return {
    ...read(address),
    name: 'latency',
    initialDelaySeconds: 1,
    query: latencyQuery,
    windowSeconds: 10,
    stepSeconds: 1,
    judge: { kind: 'mann-whitney', direction: 'increase', minSamples: 6 },
  };
}

function relative(address: string, tolerance: number) {
  return {
    ...read(address),
    name: 'latency-ratio',
    query: latencyQuery,
    windowSeconds: 10,
    stepSeconds: 1,
    judge: { kind: 'relative', measure: 'ratio', tolerance, minSamples: 3 },
  };
}

function sequential(address: string) {
  return {
    ...read(address),
    name: 'errors',
    query: 'sum(increase(chaos_errors_total{version="{{version}}"}[{{step}}]))',
    requestsQuery: 'sum(increase(chaos_requests_total{version="{{version}}"}[{{step}}]))',
    stepSeconds: 1,
    settleSeconds: 0,
    // The harness's answerer serves no real split: the sample-ratio check has nothing true to say here.
    judge: { kind: 'sequential-rate', minSamples: 100, srm: false },
  };
}

/** About how long a judged stage takes to decide once active: the initial delay, the minimum sample at a point a second, a few readings. */
export const JUDGED_BAKE_MS = 9_000;

export function judgedSpec(kind: JudgedKind, key: string, address: string) {
  const k = KINDS[kind];
  const gates = k.gates(address);
  return {
    target: { service: 'chaos', version: k.version, stableVersion: STABLE, labels: { key, bakeMs: String(JUDGED_BAKE_MS), expect: k.expect, judged: kind } },
    // No judged gate at 100 %: no baseline is left there to judge against.
    stages: [
      { name: 'canary', percent: 10, bakeSeconds: 1, gates: { providers: gates } },
      ...(k.everyStage ? [{ name: 'half', percent: 50, bakeSeconds: 1, gates: { providers: gates } }] : []),
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
  };
}
