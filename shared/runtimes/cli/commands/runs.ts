import { createReadStream, type ReadStream } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { RolloutClient, type CancelledRun, type ItemState, type RunCancelJson, type RunItemsPage, type RunsPage } from '../../../client/client.js';
import type { EnqueueRunInput } from '../../../client/producer.js';
import { errorMessage } from '../../../log.js';
import type { CommandSpec } from '../command-spec.js';
import { run, TARGET_OPTIONS, targetOf, type ClientOpts } from '../client-options.js';
import { UsageError } from '../errors.js';
import { readJsonFile, table } from '../io.js';
import { int } from '../parsers.js';

/** The fields of a run file in JSON: those of a run request (POST /runs). */
const RUN_FILE_FIELDS = ['items', 'spec', 'shards', 'itemsPerSecond', 'id'];

/** A JSON Lines file's payloads, read as they are sent (a file of millions is never held whole); a bad line is named. */
async function* jsonLines(path: string): AsyncGenerator<unknown> {
  let stream: ReadStream;
  try {
    stream = createReadStream(path, { encoding: 'utf8' });
    await once(stream, 'open');
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${errorMessage(err)}`);
  }
  let n = 0;
  let items = 0;
  for await (const line of createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY })) {
    n++;
    if (!line.trim()) continue;
    try {
      yield JSON.parse(line) as unknown;
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      throw new UsageError(`${path}:${n}: not JSON: ${err.message}`);
    }
    items++;
  }
  if (!items) throw new UsageError(`${path}: no items (a run needs at least one)`);
}

/** `rollout runs`: create, read and cancel work runs. */
export const runsCommand: CommandSpec = {
  name: 'runs',
  description: 'Work runs',
  commands: [
    {
      name: 'create',
      description:
        'Create a run from a file: JSON (an array of payloads, or {"items": [...], "spec": {...}}) or JSON Lines (.jsonl/.ndjson: one payload a line, read as it is sent); any number of items, sent 10,000 a request and paced to what the control plane accepts',
      options: [
        { flags: '--file <items.json|items.jsonl>', description: 'the items', required: true },
        { flags: '--id <id>', description: 'an id of your own (idempotent)' },
        { flags: '--spec <spec.json>', description: "the run's spec, for a JSON Lines file" },
        { flags: '--shards <n>', description: "the run's shards, for a JSON Lines file", parser: int('--shards') },
        ...TARGET_OPTIONS,
      ],
      action: async (o: ClientOpts & { file: string; id?: string; spec?: string; shards?: number }) => {
        let body: Record<string, unknown>;
        if (/\.(jsonl|ndjson)$/i.test(o.file)) {
          body = { items: jsonLines(o.file), ...(o.spec ? { spec: readJsonFile(o.spec) } : {}), ...(o.shards !== undefined ? { shards: o.shards } : {}) };
        } else {
          if (o.spec || o.shards !== undefined)
            throw new UsageError(`--spec and --shards go with a JSON Lines file; ${o.file} carries its own ("spec", "shards")`);
          const content = readJsonFile(o.file);
          const parsed = (Array.isArray(content) ? { items: content } : content) as Record<string, unknown> | null;
          if (!parsed || typeof parsed !== 'object' || !Array.isArray(parsed.items))
            throw new UsageError(`${o.file}: an array of payloads, or an object with "items" (an array)`);
          if (!parsed.items.length) throw new UsageError(`${o.file}: no items (a run needs at least one)`);
          const unknown = Object.keys(parsed).filter((k) => !RUN_FILE_FIELDS.includes(k));
          if (unknown.length)
            throw new UsageError(`${o.file}: unknown field${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (${RUN_FILE_FIELDS.join(', ')})`);
          body = parsed;
        }
        if (body.spec !== undefined && (typeof body.spec !== 'object' || body.spec === null || Array.isArray(body.spec)))
          throw new UsageError(`${o.spec ?? o.file}: the spec must be a JSON object`);
        // The fields are checked by the API, as for any request.
        const r = await new RolloutClient(targetOf(o)).enqueueRun({ ...body, ...(o.id ? { id: o.id } : {}) } as EnqueueRunInput);
        const more = r.requests > 1 || r.refused ? ` (${r.requests} requests${r.refused ? `, ${r.refused} refused and sent again` : ''})` : '';
        process.stdout.write(
          o.json ? `${JSON.stringify(r, null, 2)}\n` : `${r.created ? 'created' : 'exists'} ${r.id}: ${r.items} items, ${r.added} new${more}\n`,
        );
      },
    },
    {
      name: 'list',
      description: 'Runs, newest first, a page at a time',
      options: [
        { flags: '--limit <n>', description: 'runs in the page, 1–500', parser: int('--limit'), default: 50 },
        { flags: '--cursor <cursor>', description: "the previous page's next" },
        ...TARGET_OPTIONS,
      ],
      action: (o: ClientOpts & { limit: number; cursor?: string }) =>
        run(o, 'GET', `/runs?${new URLSearchParams({ limit: String(o.limit), ...(o.cursor ? { cursor: o.cursor } : {}) }).toString()}`, undefined, (r) => {
          const page = r as RunsPage;
          return `${table(
            page.runs.map((x) => ({ id: x.id, created: x.createdAt, shards: x.shards ?? '-', cancelled: x.cancelled ? x.cancelled.at : '' })),
            ['id', 'created', 'shards', 'cancelled'],
          )}${page.next ? `\nmore: --cursor ${page.next}` : ''}`;
        }),
    },
    {
      name: 'items',
      description: "A page of a run's items: state, attempts, worker, and why it failed",
      arguments: [{ name: '<id>' }],
      options: [
        { flags: '--state <state>', description: 'only items in this state', choices: ['pending', 'running', 'done', 'failed'] },
        { flags: '--limit <n>', description: 'items in the page, 1–1000', parser: int('--limit'), default: 100 },
        { flags: '--cursor <cursor>', description: "the previous page's next" },
        ...TARGET_OPTIONS,
      ],
      action: (id: string, o: ClientOpts & { state?: ItemState; limit: number; cursor?: string }) =>
        run(
          o,
          'GET',
          `/runs/${encodeURIComponent(id)}/items?${new URLSearchParams({ limit: String(o.limit), ...(o.state ? { state: o.state } : {}), ...(o.cursor ? { cursor: o.cursor } : {}) }).toString()}`,
          undefined,
          (r) => {
            const page = r as RunItemsPage;
            const rows = page.items.map((i) => ({ id: i.id, state: i.state, attempts: i.attempts, worker: i.worker, error: i.error ?? '' }));
            return `${table(rows, ['id', 'state', 'attempts', 'worker', 'error'])}${page.next ? `\nmore: --cursor ${page.next}` : ''}`;
          },
        ),
    },
    {
      name: 'results',
      description: 'Every done item of a run and its result, one JSON line each ({"id", "result"}), all pages',
      arguments: [{ name: '<id>' }],
      options: TARGET_OPTIONS,
      action: async (id: string, o: ClientOpts) => {
        for await (const item of new RolloutClient(targetOf(o)).allRunItems(id, { state: 'done' }))
          process.stdout.write(`${JSON.stringify({ id: item.id, result: item.result })}\n`);
      },
    },
    {
      name: 'cancel',
      description: 'Cancel a run: its pending items fail ("cancelled"), running ones end as they finish, and it takes no more items',
      arguments: [{ name: '<id>' }],
      options: [{ flags: '--reason <text>', description: "why (kept with the run and in each failed item's reason)" }, ...TARGET_OPTIONS],
      action: (id: string, o: ClientOpts & { reason?: string }) =>
        run(o, 'POST', `/runs/${encodeURIComponent(id)}/cancel`, o.reason ? { reason: o.reason } : {}, (r) => {
          const x = r as CancelledRun;
          const when = x.first ? 'cancelled' : `already cancelled at ${x.cancelled.at} by ${x.cancelled.by}`;
          const failed =
            x.pendingLeft === undefined
              ? ''
              : x.pendingLeft === null || x.pendingLeft > 0
                ? '; its coordinator fails the pending items at its next scans'
                : '; every pending item failed';
          return `${x.id} ${when}${x.cancelled.reason ? ` (${x.cancelled.reason})` : ''}${failed}; ${x.counts.running} still running end as they finish`;
        }),
    },
    {
      name: 'status',
      description: 'Items per state',
      arguments: [{ name: '<id>' }],
      options: TARGET_OPTIONS,
      action: (id: string, o: ClientOpts) =>
        run(o, 'GET', `/runs/${encodeURIComponent(id)}`, undefined, (r) => {
          const x = r as {
            id: string;
            done: boolean;
            counts: Record<string, number>;
            shards?: number | null;
            throttled?: { secondsAgo: number; keyFamily: string; requests: number } | null;
            cancelled?: RunCancelJson | null;
          };
          const layout = x.shards ? `  ${x.shards} shard${x.shards === 1 ? '' : 's'}` : '';
          // Throttling within the last few minutes is what is happening now: say so, and on which keys.
          const t = x.throttled;
          const throttled = t
            ? `\n${t.secondsAgo < 300 ? 'THROTTLED' : 'throttled'} ${t.secondsAgo} s ago on ${t.keyFamily} (${t.requests} requests refused and retried so far)${t.secondsAgo < 300 ? ': a hot key; more shards spread it (create the run with itemsPerSecond)' : ''}`
            : '';
          const cancelled = x.cancelled ? `  cancelled ${x.cancelled.at} by ${x.cancelled.by}${x.cancelled.reason ? ` (${x.cancelled.reason})` : ''}` : '';
          return `${x.id}  ${x.done ? 'done' : 'in progress'}${layout}${cancelled}\n${table([x.counts], ['pending', 'running', 'done', 'failed'])}${throttled}`;
        }),
    },
  ],
};
