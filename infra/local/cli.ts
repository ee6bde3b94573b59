#!/usr/bin/env node
import { Command, InvalidArgumentError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { COMMANDS } from '../../shared/rollout/commands.js';
import { ApiError, call } from './client.js';
import { SimulatedComputeHint } from '../../shared/drain/compute-hint.js';
import { ConfigError } from '../../shared/errors.js';
import { errorMessage, type Logger } from '../../shared/log.js';
import { runWorkerCommand, type WorkerCommandOptions, type WorkerSummary } from './worker-command.js';

/**
 * The `rollout` command. Exit codes: 0 done (or stopped, or drained), 1 a
 * runtime failure, 2 bad flags or configuration.
 */

function stderrLogger(json: boolean): Logger {
  const line = (level: string) => (message: string, extra?: Record<string, unknown>) => {
    if (json) process.stderr.write(`${JSON.stringify({ level, time: new Date().toISOString(), message, ...extra })}\n`);
    else process.stderr.write(`${new Date().toISOString()} ${level.padEnd(5)} ${message}${extra && Object.keys(extra).length ? ` ${JSON.stringify(extra)}` : ''}\n`);
  };
  return { debug: () => undefined, info: line('info'), warn: line('warn'), error: line('error') };
}

const int = (name: string) => (v: string) => {
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`${name} must be a whole number, got "${v}"`);
  return Number(v);
};

function summaryLine(s: WorkerSummary): string {
  const drain = s.drainMs === null ? '' : `, drained ${s.nacked} items in ${s.drainMs} ms${s.withinDeadline ? '' : ' (past the deadline)'}`;
  return `worker ${s.workerId} on ${s.instanceId}: ${s.exit}; done ${s.done}, stolen ${s.stolen}, lost ${s.lost}, backend failures ${s.failedRuns}${drain}`;
}

export function program(): Command {
  const cli = new Command('rollout').description('Progressive rollouts and distributed work runs, kept safe by fenced leases.')
    .showHelpAfterError('(add --help for usage)')
    // Before the subcommands: they inherit it, so a usage error returns here (exit 2) instead of exiting.
    .exitOverride();
  cli
    .command('worker')
    .description('Run a worker of one work run: pull items, claim them in the ledger, run them on a backend, record the results; drain on a spot notice.')
    .requiredOption('--run <id>', 'the run to work on')
    .addOption(new Option('--store <kind>', 'where the ledger is').choices(['postgres', 'dynamodb']).env('ROLLOUT_STORE'))
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL'))
    .addOption(new Option('--table <name>', 'DynamoDB table').env('ROLLOUT_TABLE'))
    .addOption(new Option('--queue <ledger|url>', '"ledger" (PostgreSQL: the ledger is the queue) or an SQS queue URL').env('ROLLOUT_WORK_QUEUE_URL'))
    .addOption(new Option('--coordinator <none|lambda:name|url>', 'where an idle worker asks for work (steals)').env('ROLLOUT_COORDINATOR'))
    .addOption(new Option('--backend <kind>', 'how items run').choices(['mock', 'http']).default('mock'))
    .option('--backend-url <url>', 'http backend: POST each payload here; the response body is the result')
    .option('--mock-duration-ms <ms>', 'mock backend: time per item', int('--mock-duration-ms'), 0)
    .option('--mock-failure-rate <0..1>', 'mock backend: share of items that always fail (poison)', (v) => Number(v), 0)
    .addOption(new Option('--worker-id <id>', 'this worker (default: host-pid)').env('ROLLOUT_WORKER_ID'))
    .option('--instance-id <id|auto>', 'the machine, as spot notices name it; auto reads the instance metadata (aws, gcp) or the host name', 'auto')
    .addOption(new Option('--provider <kind>', 'where it runs: which preemption notices to watch and which drain deadline applies').choices(['aws', 'gcp', 'local']).default('local'))
    .option('--metadata-endpoint <url>', 'instance metadata base URL (default 169.254.169.254 on AWS, metadata.google.internal on GCP)')
    .option('--heartbeat-ms <ms>', 'item heartbeat, visibility extension and registry heartbeat', int('--heartbeat-ms'), 5_000)
    .option('--visibility-seconds <s>', 'SQS visibility kept ahead while an item is held', int('--visibility-seconds'), 30)
    .option('--wait-seconds <s>', 'long-poll wait, 0–20', int('--wait-seconds'), 20)
    .option('--batch <n>', 'messages received at once', int('--batch'), 10)
    .option('--max-receive-count <n>', 'ledger queue: deliveries before an item is a dead letter (SQS: set on the queue)', int('--max-receive-count'), 5)
    .option('--exit-when-done', 'stop once the run has nothing pending or running', false)
    .option('--json', 'logs and the summary as JSON lines', false)
    .action(async (opts: Record<string, unknown>) => {
      const json = opts.json === true;
      const logger = stderrLogger(json);
      const preempt = new SimulatedComputeHint();
      let signals = 0;
      // SIGTERM is how ECS announces a Fargate Spot interruption (and how an orchestrator stops a task): drain.
      // SIGINT drains too; a second signal exits at once (held items return through the failure scan).
      const onSignal = (sig: NodeJS.Signals) => {
        if (++signals > 1) process.exit(130);
        logger.warn(`${sig}: draining`);
        preempt.preempt({ provider: opts.provider === 'gcp' ? 'gcp' : 'aws', instanceId: String(opts.instanceId), kind: 'interruption', receivedAt: Date.now() });
      };
      process.on('SIGTERM', onSignal).on('SIGINT', onSignal);
      const { json: _json, store, queue, ...flags } = opts;
      const input = { ...flags, store: store ?? (opts.databaseUrl ? 'postgres' : 'dynamodb'), queue: queue ?? 'ledger' };
      // The flags are checked (and named in errors) by the worker's own schema.
      const summary = await runWorkerCommand(input as WorkerCommandOptions, new AbortController().signal, logger, preempt);
      process.stdout.write(`${json ? JSON.stringify(summary) : summaryLine(summary)}\n`);
    });
  clientCommands(cli);
  return cli;
}

/** The options every client command takes: where the control plane is, and output as JSON. */
function target(cmd: Command): Command {
  return cmd
    .addOption(new Option('--url <url>', 'the control plane: a local node, a load balancer, or the deployed API URL').env('ROLLOUT_URL').default('http://127.0.0.1:8000'))
    .addOption(new Option('--aws-region <region>', 'sign requests with SigV4 for the deployed HTTP API in this region (credentials from the AWS chain)').env('ROLLOUT_AWS_REGION'))
    .option('--actor <name>', 'who is acting, for a local node (the deployed API uses your IAM identity)')
    .option('--json', 'print the response as JSON', false);
}

type ClientOpts = { url: string; awsRegion?: string; actor?: string; json: boolean };

function table(rows: Record<string, unknown>[], columns: string[]): string {
  const cell = (v: unknown): string => (v === null || v === undefined ? '-' : typeof v === 'string' ? v : JSON.stringify(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => vals.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join('\n');
}

/** Bad input the command itself found (a file): reported like a flag error, exit 2. */
class UsageError extends Error {
  override readonly name = 'UsageError';
}

function readJsonFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${errorMessage(err)}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${path} is not JSON: ${errorMessage(err)}`);
  }
}

async function run(o: ClientOpts, method: string, path: string, body: unknown, human: (r: unknown) => string): Promise<void> {
  const res = await call({ url: o.url, ...(o.awsRegion ? { awsRegion: o.awsRegion } : {}), ...(o.actor ? { actor: o.actor } : {}) }, method, path, body);
  process.stdout.write(`${o.json ? JSON.stringify(res, null, 2) : human(res)}\n`);
}

type Status = { nodeId: string; isLeader: boolean; leader: { holder: string; epoch: number; expiresAt: string } | null };
const leaderLine = (l: Status['leader']) => (l ? `${l.holder} (epoch ${l.epoch}, lease until ${l.expiresAt})` : 'none elected');
type RolloutJson = { id: string; state: string; stages: { name: string; phase: string }[] };
const stagesLine = (r: RolloutJson) => r.stages.map((s) => `${s.name}:${s.phase}`).join(' ');

function clientCommands(cli: Command): void {
  const statusAction = (o: ClientOpts) => run(o, 'GET', '/cluster/status', undefined, (r) => {
    const s = r as Status;
    return `node ${s.nodeId}${s.isLeader ? ' (leader)' : ''}\nleader ${leaderLine(s.leader)}`;
  });
  target(cli.command('status').description('The control plane at a glance: this node and the leader')).action(statusAction);
  const cluster = cli.command('cluster').description('Cluster membership and leadership');
  target(cluster.command('status').description('This node and the leader')).action(statusAction);
  target(cluster.command('leader').description('The current leader')).action((o: ClientOpts) => run(o, 'GET', '/cluster/leader', undefined, (r) => leaderLine(r as Status['leader'])));

  const rollouts = cli.command('rollouts').description('Progressive rollouts');
  target(rollouts.command('create').description('Create a rollout from a spec file (JSON)').requiredOption('--file <spec.json>', 'the rollout spec').option('--id <id>', 'an id of your own (idempotent)')).action(
    (o: ClientOpts & { file: string; id?: string }) => run(o, 'POST', '/rollouts', { spec: readJsonFile(o.file), ...(o.id ? { id: o.id } : {}) }, (r) => `${(r as { created: boolean }).created ? 'created' : 'exists'} ${(r as { id: string }).id}`),
  );
  target(rollouts.command('list').description('The running rollouts')).action((o: ClientOpts) =>
    run(o, 'GET', '/rollouts', undefined, (r) => table((r as { rollouts: RolloutJson[] }).rollouts.map((x) => ({ id: x.id, state: x.state, stages: stagesLine(x) })), ['id', 'state', 'stages'])),
  );
  target(rollouts.command('get').description('One rollout').argument('<id>')).action((id: string, o: ClientOpts) =>
    run(o, 'GET', `/rollouts/${encodeURIComponent(id)}`, undefined, (r) => {
      const x = r as RolloutJson;
      return `${x.id}  ${x.state}\n${table(x.stages.map((st) => ({ ...st })), ['name', 'phase'])}`;
    }),
  );
  for (const command of COMMANDS) {
    target(rollouts.command(command).description(`${command} a rollout (needs the leader)`).argument('<id>').option('--reason <text>', 'recorded with the change')).action((id: string, o: ClientOpts & { reason?: string }) =>
      run(o, 'POST', `/rollouts/${encodeURIComponent(id)}/${command}`, o.reason ? { reason: o.reason } : {}, (r) => {
        const a = (r as { action: { transition: string; applied: boolean; events: string[] } }).action;
        return `${a.transition}: ${a.applied ? 'applied' : 'not applied'}${a.events.length ? ` (${a.events.join(', ')})` : ''}`;
      }),
    );
  }

  const runs = cli.command('runs').description('Work runs');
  target(runs.command('create').description('Create a run from a JSON file: an array of payloads, or {"items": [...], "spec": {...}}').requiredOption('--file <items.json>', 'the items').option('--id <id>', 'an id of your own (idempotent)')).action(
    (o: ClientOpts & { file: string; id?: string }) => {
      const content = readJsonFile(o.file);
      const body = Array.isArray(content) ? { items: content } : content;
      return run(o, 'POST', '/runs', { ...(body as object), ...(o.id ? { id: o.id } : {}) }, (r) => {
        const x = r as { id: string; created: boolean; items: number; added: number };
        return `${x.created ? 'created' : 'exists'} ${x.id}: ${x.items} items, ${x.added} new`;
      });
    },
  );
  target(runs.command('status').description('Items per state').argument('<id>')).action((id: string, o: ClientOpts) =>
    run(o, 'GET', `/runs/${encodeURIComponent(id)}`, undefined, (r) => {
      const x = r as { id: string; done: boolean; counts: Record<string, number> };
      return `${x.id}  ${x.done ? 'done' : 'in progress'}\n${table([x.counts], ['pending', 'running', 'done', 'failed'])}`;
    }),
  );
}

export async function main(argv: readonly string[]): Promise<number> {
  try {
    await program().parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help') return 0;
    if (typeof code === 'string' && code.startsWith('commander.')) return 2;
    process.stderr.write(`rollout: ${errorMessage(err)}\n`);
    if (err instanceof UsageError) return 2;
    if (err instanceof ApiError) return err.status === 400 ? 2 : 1;
    return err instanceof ConfigError ? 2 : 1;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  // Exit explicitly: idle keep-alive sockets of the AWS SDK would hold the process open.
  process.exit(await main(process.argv.slice(2)));
}
