import type { RolloutJson } from '../../../api/rollout-json.js';
import { RolloutClient, RolloutWaitTimeoutError, type HistoryEntryJson, type RolloutsPage } from '../../../client/client.js';
import { COMMANDS } from '../../../rollout/command-names.js';
import type { CommandSpec } from '../command-spec.js';
import { run, TARGET_OPTIONS, targetOf, type ClientOpts } from '../client-options.js';
import { ExitCode } from '../errors.js';
import { readJsonFile, table } from '../io.js';
import { rolloutTree, transitions } from '../rollout-view.js';
import { duration, int } from '../parsers.js';

const stagesLine = (r: RolloutJson) => r.stages.map((s) => `${s.name}:${s.phase}`).join(' ');

/** `rollout rollouts`: create, read, wait for and steer progressive rollouts. */
export const rolloutsCommand: CommandSpec = {
  name: 'rollouts',
  description: 'Progressive rollouts',
  commands: [
    {
      name: 'create',
      description: 'Create a rollout from a spec file (JSON)',
      options: [
        { flags: '--file <spec.json>', description: 'the rollout spec', required: true },
        { flags: '--id <id>', description: 'an id of your own (idempotent)' },
        ...TARGET_OPTIONS,
      ],
      action: (o: ClientOpts & { file: string; id?: string }) =>
        run(
          o,
          'POST',
          '/rollouts',
          { spec: readJsonFile(o.file), ...(o.id ? { id: o.id } : {}) },
          (r) => `${(r as { created: boolean }).created ? 'created' : 'exists'} ${(r as { id: string }).id}`,
        ),
    },
    {
      name: 'list',
      description: 'The running rollouts; with --state, every rollout (or those in a state), newest first, a page at a time',
      options: [
        {
          flags: '--state <state>',
          description: 'all, or running, paused, completed, rolled_back, aborted',
          choices: ['all', 'running', 'paused', 'completed', 'rolled_back', 'aborted'],
        },
        { flags: '--limit <n>', description: 'with --state: rollouts in the page, 1–500', parser: int('--limit') },
        { flags: '--cursor <cursor>', description: "with --state: the previous page's next" },
        ...TARGET_OPTIONS,
      ],
      action: (o: ClientOpts & { state?: string; limit?: number; cursor?: string }) => {
        if (o.state === undefined && o.limit === undefined && o.cursor === undefined) {
          return run(o, 'GET', '/rollouts', undefined, (r) =>
            table(
              (r as { rollouts: RolloutJson[] }).rollouts.map((x) => ({ id: x.id, state: x.state, stages: stagesLine(x) })),
              ['id', 'state', 'stages'],
            ),
          );
        }
        const q = new URLSearchParams({
          state: o.state ?? 'all',
          ...(o.limit !== undefined ? { limit: String(o.limit) } : {}),
          ...(o.cursor ? { cursor: o.cursor } : {}),
        });
        return run(o, 'GET', `/rollouts?${q.toString()}`, undefined, (r) => {
          const page = r as RolloutsPage;
          const rows = page.rollouts.map((x) => ({
            id: x.id,
            state: x.state,
            service: x.service,
            version: x.newVersion,
            created: x.createdAt,
            reason: x.stateReason ?? '',
          }));
          return `${table(rows, ['id', 'state', 'service', 'version', 'created', 'reason'])}${page.next ? `\nmore: --cursor ${page.next}` : ''}`;
        });
      },
    },
    {
      name: 'get',
      description: 'One rollout',
      arguments: [{ name: '<id>' }],
      options: [
        { flags: '--watch', description: 'redraw it as it changes until it ends (Ctrl-C stops watching)', default: false },
        { flags: '--poll <duration>', description: '--watch: read it this often', parser: duration('--poll'), default: 2_000 },
        ...TARGET_OPTIONS,
      ],
      action: async (id: string, o: ClientOpts & { watch: boolean; poll: number }) => {
        const client = new RolloutClient(targetOf(o));
        if (!o.watch) {
          const r = await client.getRollout(id);
          process.stdout.write(o.json ? `${JSON.stringify(r, null, 2)}\n` : `${rolloutTree(r, await client.rolloutHistory(id), Date.now())}\n`);
          return;
        }
        // Redrawn on every change of what the server answers (a reading, a metric, an actuation, a transition):
        // on a terminal in place, at every read (the bake counts down); into a file or a pipe, appended once per change.
        const tty = process.stdout.isTTY && !o.json;
        let seen = '';
        let history: readonly HistoryEntryJson[] | null = null;
        let historyAt = -1;
        await client.waitForRollout(id, {
          pollMs: o.poll,
          onRead: async (r) => {
            const json = JSON.stringify(r);
            const changed = json !== seen;
            seen = json;
            if (o.json) {
              if (changed) process.stdout.write(`${seen}\n`);
              return;
            }
            if (r.version !== historyAt) [history, historyAt] = [await client.rolloutHistory(id), r.version];
            if (tty) process.stdout.write(`\x1b[2J\x1b[H${new Date().toISOString()}\n${rolloutTree(r, history, Date.now())}\n`);
            else if (changed) process.stdout.write(`${new Date().toISOString()}\n${rolloutTree(r, history, Date.now())}\n\n`);
          },
        });
      },
    },
    {
      name: 'history',
      description: 'Every transition of a rollout, oldest first: what, when, who, why',
      arguments: [{ name: '<id>' }],
      options: TARGET_OPTIONS,
      action: (id: string, o: ClientOpts) =>
        run(o, 'GET', `/rollouts/${encodeURIComponent(id)}/history`, undefined, (r) => transitions((r as { history: HistoryEntryJson[] }).history)),
    },
    {
      name: 'status',
      description: 'Wait until a rollout ends: exit 0 completed, 1 rolled back or aborted, 3 still going at --timeout (for CI pipelines)',
      arguments: [{ name: '<id>' }],
      options: [
        { flags: '--timeout <duration>', description: 'give up after this long (30m, 90s, 2h; default: wait for good)', parser: duration('--timeout') },
        { flags: '--poll <duration>', description: 'read the rollout this often', parser: duration('--poll'), default: 2_000 },
        ...TARGET_OPTIONS,
      ],
      action: async (id: string, o: ClientOpts & { timeout?: number; poll: number }) => {
        const client = new RolloutClient(targetOf(o));
        // Progress on stderr, one line per change; the outcome on stdout.
        const progress = (r: RolloutJson) => process.stderr.write(`${new Date().toISOString()}  ${r.id}  ${r.state}  attempt ${r.attempt}  ${stagesLine(r)}\n`);
        let ended: RolloutJson;
        // A pipeline's log says at once when the control plane does not answer, and why, whatever the timeout.
        const retrying = `trying again every ${o.poll / 1000} s${o.timeout !== undefined ? `, for up to ${Math.round(o.timeout / 1000)} s` : ''}`;
        let answered = false;
        const silent = setTimeout(() => {
          if (!answered) process.stderr.write(`${new Date().toISOString()}  no answer yet from ${o.url} (${retrying})\n`);
        }, 5_000);
        try {
          ended = await client.waitForRollout(id, {
            pollMs: o.poll,
            onChange: (r) => {
              answered = true;
              if (!o.json) progress(r);
            },
            onError: (err) => {
              answered = true;
              process.stderr.write(`${new Date().toISOString()}  cannot read rollout ${id}: ${err.message} (${retrying})\n`);
            },
            ...(o.timeout !== undefined ? { timeoutMs: o.timeout } : {}),
          });
        } catch (err) {
          clearTimeout(silent);
          if (!(err instanceof RolloutWaitTimeoutError)) throw err;
          process.stdout.write(
            o.json
              ? `${JSON.stringify({ ...err.last, timedOut: true }, null, 2)}\n`
              : `${id}  ${err.last.state}: not ended after ${Math.round((o.timeout ?? 0) / 1000)} s\n`,
          );
          throw new ExitCode(3);
        }
        clearTimeout(silent);
        process.stdout.write(o.json ? `${JSON.stringify(ended, null, 2)}\n` : `${id}  ${ended.state}${ended.stateReason ? `  (${ended.stateReason})` : ''}\n`);
        if (ended.state !== 'completed') throw new ExitCode(1);
      },
    },
    ...COMMANDS.map((command): CommandSpec => ({
      name: command,
      description: `${command} a rollout (needs the leader)`,
      arguments: [{ name: '<id>' }],
      options: [{ flags: '--reason <text>', description: 'recorded with the change' }, ...TARGET_OPTIONS],
      action: (id: string, o: ClientOpts & { reason?: string }) =>
        run(o, 'POST', `/rollouts/${encodeURIComponent(id)}/${command}`, o.reason ? { reason: o.reason } : {}, (r) => {
          const a = (r as { action: { transition: string; applied: boolean; events: string[] } }).action;
          return `${a.transition}: ${a.applied ? 'applied' : 'not applied'}${a.events.length ? ` (${a.events.join(', ')})` : ''}`;
        }),
    })),
  ],
};
