/**
 * A Prometheus-compatible range-query answerer whose series the caller
 * writes as a function: `/api/v1/query_range` (GET or a form POST, as the
 * provider sends it) answers one series whose point at each step is
 * `series(query, t)`, t in epoch seconds. Deterministic where a real
 * Prometheus depends on scrapes landing in time: what a judged gate reads is
 * fixed by the query and the clock alone.
 */
import { createServer, type Server } from 'node:http';
import { closeNow, listenOnLoopback, withBody } from './local-server.js';

/** A point's value; null: no point at that step; undefined (at every step): the query matches no series. */
export type SeriesFunction = (query: string, t: number) => number | null | undefined;

export interface FakePrometheus {
  /** `http://127.0.0.1:PORT`, the base a gate's `address` names. */
  readonly url: string;
  /** Range queries answered so far. */
  readonly answered: () => number;
  stop(): Promise<void>;
}

/** At most this many points an answer (Prometheus refuses more than 11,000). */
const MAX_POINTS = 11_000;

function seconds(raw: string | null): number {
  if (raw === null) return NaN;
  const unit = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(raw.trim());
  if (!unit) return Number(raw);
  const n = Number(unit[1]);
  return unit[2] === 'ms' ? n / 1000 : unit[2] === 'm' ? n * 60 : unit[2] === 'h' ? n * 3600 : n;
}

export async function startFakePrometheus(series: SeriesFunction): Promise<FakePrometheus> {
  let answered = 0;
  const server: Server = createServer(
    withBody((req, res, body) => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const params = new URLSearchParams(url.search);
      if (req.method === 'POST') for (const [k, v] of new URLSearchParams(body.toString('utf8'))) params.set(k, v);
      const error = (status: number, message: string) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'error', errorType: 'bad_data', error: message }));
      if (url.pathname !== '/api/v1/query_range') return error(404, `${url.pathname}: only /api/v1/query_range is served`);
      const query = params.get('query');
      const start = seconds(params.get('start'));
      const end = seconds(params.get('end'));
      const step = seconds(params.get('step'));
      if (!query) return error(400, 'query is missing');
      if (![start, end, step].every(Number.isFinite) || step <= 0 || end < start)
        return error(400, 'start, end and step must be numbers, step > 0, end ≥ start');
      if ((end - start) / step + 1 > MAX_POINTS) return error(400, `more than ${MAX_POINTS} points`);
      const values: [number, string][] = [];
      let matched = false;
      for (let t = start; t <= end + 1e-9; t += step) {
        const v = series(query, t);
        if (v !== undefined) matched = true;
        if (v !== null && v !== undefined) values.push([t, String(v)]);
      }
      answered++;
      const result = matched ? [{ metric: { query }, values }] : [];
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'success', data: { resultType: 'matrix', result } }));
    }),
  );
  const url = await listenOnLoopback(server);
  return { url, answered: () => answered, stop: () => closeNow(server) };
}
