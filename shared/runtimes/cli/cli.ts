#!/usr/bin/env node
import { Command, InvalidArgumentError, Option } from 'commander';
import { createReadStream, readFileSync, realpathSync, type ReadStream } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import type { ActuationJson, GateJson, RolloutJson } from '../../api/rollout-json.js';
import {
  RolloutClient,
  RolloutWaitTimeoutError,
  type HistoryEntryJson,
  type ItemState,
  type RolloutsPage,
  type RunItemsPage,
  type RunsPage,
  type CancelledRun,
  type RunCancelJson,
} from '../../client/client.js';
import { COMMANDS } from '../../rollout/commands.js';
import { InvalidEventError, parseInboundEvent } from '../../rollout/inbound.js';
import { ROLLOUT_SIGNAL_TYPES } from '../../topology.js';
import { ApiError, call, type Target } from '../../client/transport.js';
import type { EnqueueRunInput } from '../../client/producer.js';
import { ConfigError } from '../../errors.js';
import { errorMessage, lineLogger, type Logger } from '../../log.js';
import { UsageError } from './errors.js';
import type { NodeConfigInput } from '../node/config.js';
import { SCOPES } from '../../auth/scopes.js';
import { DEFAULT_RETENTION } from '../../retention.js';
import { mintToken, parseScopes } from '../../auth/tokens.js';
import { runWorkerCommand, type WorkerCommandOptions, type WorkerSummary } from '../worker/worker-command.js';
import { own } from '../../own.js';

/**
 * The `rollout` command. Exit codes: 0 done (or stopped, or drained), 1 a
 * runtime failure, 2 bad flags or configuration; `rollouts status`: 0
 * completed, 1 rolled back or aborted, 3 still going at --timeout.
 */

/** The package's version, from its package.json (two levels above this file in the sources and in dist/). */
function packageVersion(): string {
  for (const up of ['../../../package.json', '../../../../package.json']) {
    try {
      const p = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (p.name === 'rollout-control-plane' && p.version) return p.version;
    } catch {
      // not there: the other layout
    }
  }
  return 'unknown';
}

/** An exit code a command chose (not an error): `rollouts status` says how the rollout ended. */
export class ExitCode extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

/** `30m`, `90s`, `2h`, `1500ms` or a number of seconds, as milliseconds. */
export function duration(name: string): (v: string) => number {
  return (v) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
    if (!m) throw new InvalidArgumentError(`${name}: a duration such as 30m, 90s, 2h or 1500ms, not "${v}"`);
    const n = Number(m[1]);
    return Math.round(n * { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h']);
  };
}

/** Logs on stderr: readable lines, or (`--json`) the one shape every runtime writes, with `fields` on each line. */
function stderrLogger(json: boolean, service: string, fields: Record<string, unknown> = {}): Logger {
  return lineLogger({ service, write: (line) => process.stderr.write(line), human: !json, ...(json ? { fields } : {}) });
}

const int = (name: string) => (v: string) => {
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`${name} must be a whole number, got "${v}"`);
  return Number(v);
};

function summaryLine(s: WorkerSummary): string {
  const drain = s.drainMs === null ? '' : `, drained ${s.nacked} items in ${s.drainMs} ms${s.withinDeadline ? '' : ' (past the deadline)'}`;
  return `worker ${s.workerId} on ${s.instanceId}${s.runs.length > 1 ? ` (${s.runs.length} runs)` : ''}: ${s.exit}; done ${s.done}, stolen ${s.stolen}, lost ${s.lost}, backend failures ${s.failedRuns}${drain}`;
}

export function program(): Command {
  const cli = new Command('rollout')
    .description('Progressive rollouts and distributed work runs, kept safe by fenced leases.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .showHelpAfterError('(add --help for usage)')
    // Before the subcommands: they inherit it, so a usage error returns here (exit 2) instead of exiting.
    .exitOverride();
  cli
    .command('worker')
    .description(
      'Run a worker of one or more work runs: pull items, claim them in the ledger, run them (on a backend, or your --module), record the results; drain on a spot notice.',
    )
    .requiredOption('--run <id...>', 'the run to work on (several: --run a --run b, or --run a b)')
    .addOption(new Option('--store <kind>', 'where the ledger is').choices(['postgres', 'dynamodb']).env('ROLLOUT_STORE'))
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL'))
    .addOption(new Option('--table <name>', 'DynamoDB table').env('ROLLOUT_TABLE'))
    .addOption(new Option('--queue <ledger|url>', '"ledger" (PostgreSQL: the ledger is the queue) or an SQS queue URL').env('ROLLOUT_WORK_QUEUE_URL'))
    .addOption(new Option('--coordinator <none|lambda:name|url>', 'where an idle worker asks for work (steals)').env('ROLLOUT_COORDINATOR'))
    .addOption(new Option('--token <token>', "a bearer token with the worker scope, for a node's coordinator with authentication on").env('ROLLOUT_TOKEN'))
    .addOption(new Option('--ca-file <pem>', "the CA a node's HTTPS certificate chains to").env('ROLLOUT_CA_FILE'))
    .addOption(new Option('--backend <kind>', 'how items run (default mock; module with --module)').choices(['mock', 'http', 'module']))
    .option(
      '--module <file>',
      'your own JavaScript module: its default export (or `handler`), async (item, { signal, heartbeat, progress, attempt, runId }) => result, runs each item',
    )
    .option(
      '--item-timeout <duration|none>',
      'how long one attempt of an item may run before it fails as timed out (90s, 30m, 2h; default none: as long as it takes, kept by heartbeats)',
      (v) => (v === 'none' ? null : duration('--item-timeout')(v)),
    )
    .option('--stall <duration>', 'fail an attempt whose --module handler has not called heartbeat() or progress() for this long', (v) =>
      duration('--stall')(v),
    )
    .option('--backend-url <url>', 'http backend: POST each payload here; the response body is the result')
    .option(
      '--backend-timeout <duration|none>',
      'http backend: how long one call may take (90s, 30m, 2h), or none: as long as it takes, the item kept by heartbeats (default 60s)',
      (v) => (v === 'none' ? null : duration('--backend-timeout')(v)),
    )
    .option('--mock-duration-ms <ms>', 'mock backend: time per item', int('--mock-duration-ms'), 0)
    .option('--mock-failure-rate <0..1>', 'mock backend: share of items that always fail (poison)', (v) => Number(v), 0)
    .addOption(new Option('--worker-id <id>', 'this worker (default: host-pid)').env('ROLLOUT_WORKER_ID'))
    .option('--instance-id <id|auto>', 'the machine, as spot notices name it; auto reads the instance metadata (aws, gcp) or the host name', 'auto')
    .addOption(
      new Option('--provider <kind>', 'where it runs: which preemption notices to watch and which drain deadline applies')
        .choices(['aws', 'gcp', 'local'])
        .default('local'),
    )
    .option('--metadata-endpoint <url>', 'instance metadata base URL (default 169.254.169.254 on AWS, metadata.google.internal on GCP)')
    .option('--heartbeat-ms <ms>', 'item heartbeat, visibility extension and registry heartbeat', int('--heartbeat-ms'), 5_000)
    .option('--visibility-seconds <s>', 'SQS visibility kept ahead while an item is held', int('--visibility-seconds'), 30)
    .option('--wait-seconds <s>', 'long-poll wait, 0–20', int('--wait-seconds'), 20)
    .option('--batch <n>', 'messages received at once', int('--batch'), 10)
    .option(
      '--chunk-budget-ms <ms>',
      'how long a chunk of started (unstealable) items may take; items are started a chunk at a time, sized from their measured duration',
      int('--chunk-budget-ms'),
      100,
    )
    .option('--max-receive-count <n>', 'ledger queue: deliveries before an item is a dead letter (SQS: set on the queue)', int('--max-receive-count'), 5)
    .option('--exit-when-done', 'stop once the run has nothing pending or running', false)
    .addOption(
      new Option('--retain-runs <days>', 'DynamoDB: an item this worker finishes is deleted (TTL) this many days after')
        .argParser(days('--retain-runs'))
        .env('ROLLOUT_RETAIN_RUNS_DAYS')
        .default(DEFAULT_RETENTION.runDays),
    )
    .option('--metrics-port <port>', 'serve Prometheus metrics at /metrics on this port (0: any free one, logged)', int('--metrics-port'))
    .option('--metrics-host <host>', 'the address --metrics-port listens on', '127.0.0.1')
    .option('--json', 'logs and the summary as JSON lines', false)
    .action(async (opts: Record<string, unknown>) => {
      const json = opts.json === true;
      const runs = Array.isArray(opts.run) ? (opts.run as string[]) : [];
      // A worker of one run (the usual case) marks every line with it; a worker of several names the run where it matters.
      const logger = stderrLogger(json, 'rollout-worker', runs.length === 1 ? { runId: runs[0] } : {});
      let drain = () => undefined as void;
      let signals = 0;
      // SIGTERM is how ECS announces a Fargate Spot interruption (and how an orchestrator stops a task): drain.
      // SIGINT drains too; a second signal exits at once (held items return through the failure scan).
      const onSignal = (sig: NodeJS.Signals) => {
        if (++signals > 1) process.exit(130);
        logger.warn(`${sig}: draining`);
        drain();
      };
      process.on('SIGTERM', onSignal).on('SIGINT', onSignal);
      const { json: _json, store, queue, backendTimeout, itemTimeout, stall, run, backend, retainRuns, ...flags } = opts;
      const input = {
        ...flags,
        retainRunDays: retainRuns,
        runs: run,
        store: store ?? (opts.databaseUrl ? 'postgres' : 'dynamodb'),
        queue: queue ?? 'ledger',
        backend: backend ?? (opts.module ? 'module' : 'mock'),
        ...(backendTimeout !== undefined ? { backendTimeoutMs: backendTimeout } : {}),
        ...(itemTimeout !== undefined ? { itemTimeoutMs: itemTimeout } : {}),
        ...(stall !== undefined ? { stallMs: stall } : {}),
      };
      // The flags are checked (and named in errors) by the worker's own schema.
      const summary = await runWorkerCommand(input as WorkerCommandOptions, new AbortController().signal, logger, (d) => (drain = d));
      process.stdout.write(`${json ? JSON.stringify(summary) : summaryLine(summary)}\n`);
    });
  nodeCommands(cli);
  clientCommands(cli);
  authCommands(cli);
  storeCommands(cli);
  cli
    .command('completion')
    .description('Print a shell completion script: eval "$(rollout completion bash)" in ~/.bashrc, or rollout completion zsh > "${fpath[1]}/_rollout"')
    .argument('<shell>', 'bash or zsh')
    .action((shell: string) => {
      if (shell !== 'bash' && shell !== 'zsh') throw new UsageError(`completion: bash or zsh, not "${shell}"`);
      process.stdout.write(completionScript(cli, shell));
    });
  return cli;
}

/**
 * A completion script drawn from the command tree itself, so it never lags
 * behind the commands: each command path (`rollouts status`) maps to the
 * words that may follow it (its subcommands, then its options).
 */
export function completionScript(cli: Command, shell: 'bash' | 'zsh'): string {
  const table: [string, string][] = [];
  const walk = (cmd: Command, path: string[]) => {
    const words = [...cmd.commands.map((c) => c.name()), ...cmd.options.flatMap((o) => [o.long, o.short].filter((f): f is string => Boolean(f)))];
    table.push([path.join(' '), [...new Set(words)].join(' ')]);
    for (const sub of cmd.commands) walk(sub, [...path, sub.name()]);
  };
  walk(cli, []);
  const cases = table.map(([path, words]) => `    "${path}") words="${words}" ;;`).join('\n');
  const body = `_rollout() {
  local cur path="" w words=""
  cur="\${COMP_WORDS[COMP_CWORD]}"
  # The command path: the words before the cursor that are not options or their values.
  for w in "\${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
    case "$w" in -*) ;; *) case " $(_rollout_words "$path") " in *" $w "*) path="\${path:+$path }$w" ;; esac ;; esac
  done
  words="$(_rollout_words "$path")"
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
}
_rollout_words() {
  local words=""
  case "$1" in
${cases}
  esac
  printf '%s' "$words"
}
`;
  return shell === 'bash'
    ? `# rollout ${packageVersion()} completion (bash)\n${body}complete -o default -F _rollout rollout\n`
    : `#compdef rollout\n# rollout ${packageVersion()} completion (zsh, through bash's)\nautoload -U +X bashcompinit && bashcompinit\n${body}complete -o default -F _rollout rollout\n`;
}

const days = (name: string) => (v: string) => {
  const n = Number(v);
  if (!(n > 0 && n <= 36_500)) throw new InvalidArgumentError(`${name} must be a number of days, more than 0 and at most 36500, got "${v}"`);
  return n;
};

const seconds = (name: string) => (v: string) => {
  const n = Number(v);
  if (!(n > 0)) throw new InvalidArgumentError(`${name} must be a positive number of seconds, got "${v}"`);
  return n;
};

/** The options a node takes on what its requests may reach and who may ask (start and serve alike). */
function trustOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option(
        '--outbound-config <file.json>',
        'what a spec may make this node request: allowed origins and the credentials bound to them (none by default)',
      ).env('ROLLOUT_OUTBOUND_CONFIG'),
    )
    .addOption(
      new Option('--targets-config <file.json>', 'the targets rollouts may move, by name: nginx includes, Lambda aliases, ALB rules (none by default)').env(
        'ROLLOUT_TARGETS_CONFIG',
      ),
    )
    .addOption(
      new Option('--auth-tokens-file <file>', 'bearer tokens this node accepts: lines of "sha256:<hex> <actor> <scope,scope…>" (see rollout auth token)').env(
        'ROLLOUT_AUTH_TOKENS_FILE',
      ),
    )
    .addOption(new Option('--oidc-issuer <url>', 'accept JWTs from this OIDC issuer (keys from its discovery document)').env('ROLLOUT_OIDC_ISSUER'))
    .addOption(new Option('--oidc-audience <aud>', 'the audience the JWTs must name').env('ROLLOUT_OIDC_AUDIENCE'))
    .addOption(new Option('--oidc-jwks-url <url>', "the issuer's JWKS, when not from discovery").env('ROLLOUT_OIDC_JWKS_URL'))
    .addOption(new Option('--oidc-actor-claim <claim>', 'the claim that names the actor').env('ROLLOUT_OIDC_ACTOR_CLAIM').default('sub'))
    .addOption(
      new Option('--oidc-scopes-claim <claim>', 'the claim that carries scopes (or groups, with --oidc-scope-map)')
        .env('ROLLOUT_OIDC_SCOPES_CLAIM')
        .default('scope'),
    )
    .addOption(
      new Option('--oidc-runs-claim <claim>', "the claim that binds a worker's token to runs (ids, or *)")
        .env('ROLLOUT_OIDC_RUNS_CLAIM')
        .default('rollout_runs'),
    )
    .addOption(
      new Option('--oidc-worker-claim <claim>', "the claim that binds a worker's token to a worker id (or a prefix ending in *)")
        .env('ROLLOUT_OIDC_WORKER_CLAIM')
        .default('rollout_worker'),
    )
    .addOption(new Option('--oidc-scope-map <json>', 'claim values to scopes, e.g. {"platform-admins":["read","admin"]}').env('ROLLOUT_OIDC_SCOPE_MAP'))
    .addOption(
      new Option('--signal-keys-file <file>', 'reporters that sign their signals instead of holding a token: lines of "<reporter> <secret>"').env(
        'ROLLOUT_SIGNAL_KEYS_FILE',
      ),
    )
    .addOption(new Option('--tls-cert <file>', 'serve HTTPS with this certificate (PEM)').env('ROLLOUT_TLS_CERT'))
    .addOption(new Option('--tls-key <file>', "the certificate's private key (PEM)").env('ROLLOUT_TLS_KEY'))
    .addOption(
      new Option('--tls-client-ca <file>', 'ask for client certificates and accept those this CA signed; the actor is cert:<subject CN>').env(
        'ROLLOUT_TLS_CLIENT_CA',
      ),
    )
    .addOption(new Option('--tls-client-scopes <scopes>', 'scopes of a client-certificate caller').env('ROLLOUT_TLS_CLIENT_SCOPES').default('read'))
    .addOption(
      new Option(
        '--allowed-hosts <names>',
        'Host names this node answers to, comma-separated ("*": any); default: loopback and its own names while authentication is off',
      ).env('ROLLOUT_ALLOWED_HOSTS'),
    )
    .addOption(
      new Option('--rate-limit <rps>', 'requests per second per peer address, but for traffic and assignment reads (0: none; default 200)')
        .argParser((v) => nonNegative('--rate-limit', v))
        .env('ROLLOUT_RATE_LIMIT'),
    )
    .addOption(
      new Option('--rate-limit-per-credential <rps>', 'requests per second per credential, but for traffic and assignment reads (0: none; default 100)')
        .argParser((v) => nonNegative('--rate-limit-per-credential', v))
        .env('ROLLOUT_RATE_LIMIT_PER_CREDENTIAL'),
    )
    .addOption(
      new Option(
        '--rate-limit-cheap-reads <rps>',
        "a rollout's traffic and assignment reads per second per peer address (0: none; default 5000, none when --rate-limit is 0)",
      )
        .argParser((v) => nonNegative('--rate-limit-cheap-reads', v))
        .env('ROLLOUT_RATE_LIMIT_CHEAP_READS'),
    )
    .addOption(
      new Option(
        '--rate-limit-cheap-reads-per-credential <rps>',
        "a rollout's traffic and assignment reads per second per credential (0: none; default 5000, none when --rate-limit-per-credential is 0)",
      )
        .argParser((v) => nonNegative('--rate-limit-cheap-reads-per-credential', v))
        .env('ROLLOUT_RATE_LIMIT_CHEAP_READS_PER_CREDENTIAL'),
    )
    .addOption(
      new Option('--trusted-proxies <addresses>', 'proxies whose X-Forwarded-For names the client, comma-separated (the shipped nginx sets it)').env(
        'ROLLOUT_TRUSTED_PROXIES',
      ),
    )
    .addOption(
      new Option('--insecure-no-auth', 'serve beyond loopback with no authentication: anyone who reaches the node may do anything').env(
        'ROLLOUT_INSECURE_NO_AUTH',
      ),
    );
}

interface TrustOpts {
  outboundConfig?: string;
  targetsConfig?: string;
  authTokensFile?: string;
  oidcIssuer?: string;
  oidcAudience?: string;
  oidcJwksUrl?: string;
  oidcActorClaim: string;
  oidcScopesClaim: string;
  oidcRunsClaim: string;
  oidcWorkerClaim: string;
  oidcScopeMap?: string;
  signalKeysFile?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsClientCa?: string;
  tlsClientScopes: string;
  allowedHosts?: string;
  rateLimit?: number;
  rateLimitPerCredential?: number;
  rateLimitCheapReads?: number;
  rateLimitCheapReadsPerCredential?: number;
  trustedProxies?: string;
  insecureNoAuth?: boolean | string;
}

const TRUST_KEYS = [
  'outboundConfig',
  'targetsConfig',
  'authTokensFile',
  'oidcIssuer',
  'oidcAudience',
  'oidcJwksUrl',
  'oidcActorClaim',
  'oidcScopesClaim',
  'oidcRunsClaim',
  'oidcWorkerClaim',
  'oidcScopeMap',
  'signalKeysFile',
  'tlsCert',
  'tlsKey',
  'tlsClientCa',
  'tlsClientScopes',
  'allowedHosts',
  'rateLimit',
  'rateLimitPerCredential',
  'rateLimitCheapReads',
  'rateLimitCheapReadsPerCredential',
  'trustedProxies',
  'insecureNoAuth',
] as const;

function nonNegative(name: string, v: string): number {
  const n = Number(v);
  if (!(n >= 0)) throw new InvalidArgumentError(`${name} must be a number ≥ 0, got "${v}"`);
  return n;
}

const flag = (v: boolean | string | undefined) => v === true || v === 'true' || v === '1';

/** The rate limits given on the command line; the rest keep the node's defaults. */
function rateLimitConfig(o: TrustOpts): Pick<NodeConfigInput, 'rateLimit'> {
  const given = {
    ...(o.rateLimit !== undefined ? { perAddress: Number(o.rateLimit) } : {}),
    ...(o.rateLimitPerCredential !== undefined ? { perCredential: Number(o.rateLimitPerCredential) } : {}),
    ...(o.rateLimitCheapReads !== undefined ? { cheapReadsPerAddress: Number(o.rateLimitCheapReads) } : {}),
    ...(o.rateLimitCheapReadsPerCredential !== undefined ? { cheapReadsPerCredential: Number(o.rateLimitCheapReadsPerCredential) } : {}),
  };
  return Object.keys(given).length > 0 ? { rateLimit: given } : {};
}

/** The node configuration the trust options give; checked, field by field, by the node's own schema. */
function trustConfig(o: TrustOpts): Pick<NodeConfigInput, 'outbound' | 'auth' | 'tls' | 'allowedHosts' | 'rateLimit' | 'trustedProxies'> {
  if ((o.tlsCert === undefined) !== (o.tlsKey === undefined)) throw new UsageError('--tls-cert and --tls-key go together');
  if (o.oidcIssuer && !o.oidcAudience) throw new UsageError('--oidc-issuer needs --oidc-audience: the audience the tokens must be meant for');
  let scopeMap: unknown;
  if (o.oidcScopeMap) {
    try {
      scopeMap = JSON.parse(o.oidcScopeMap);
    } catch (err) {
      throw new UsageError(`--oidc-scope-map is not JSON: ${errorMessage(err)}`);
    }
  }
  return {
    ...(o.outboundConfig ? { outbound: readJsonFile(o.outboundConfig) as NodeConfigInput['outbound'] } : {}),
    ...(o.targetsConfig ? { targets: readJsonFile(o.targetsConfig) as NodeConfigInput['targets'] } : {}),
    auth: {
      // Paths: the node reads them, and names them in its errors.
      ...(o.authTokensFile ? { tokensFile: o.authTokensFile } : {}),
      ...(o.signalKeysFile ? { signalKeysFile: o.signalKeysFile } : {}),
      ...(o.oidcIssuer
        ? {
            oidc: {
              issuer: o.oidcIssuer,
              audience: o.oidcAudience!,
              actorClaim: o.oidcActorClaim,
              scopesClaim: o.oidcScopesClaim,
              runsClaim: o.oidcRunsClaim,
              workerClaim: o.oidcWorkerClaim,
              ...(o.oidcJwksUrl ? { jwksUrl: o.oidcJwksUrl } : {}),
              ...(scopeMap ? { scopeMap: scopeMap as Record<string, never[]> } : {}),
            },
          }
        : {}),
      certificateScopes: o.tlsClientScopes.split(',').map((x) => x.trim()) as never[],
      insecureNoAuth: flag(o.insecureNoAuth),
    },
    ...(o.tlsCert && o.tlsKey ? { tls: { certFile: o.tlsCert, keyFile: o.tlsKey, ...(o.tlsClientCa ? { clientCaFile: o.tlsClientCa } : {}) } } : {}),
    ...(o.trustedProxies
      ? {
          trustedProxies: o.trustedProxies
            .split(',')
            .map((h) => h.trim())
            .filter(Boolean),
        }
      : {}),
    ...(o.allowedHosts
      ? {
          allowedHosts: o.allowedHosts
            .split(',')
            .map((h) => h.trim())
            .filter(Boolean),
        }
      : {}),
    ...rateLimitConfig(o),
  };
}

/** `o` without the trust options (what the command itself takes). */
function withoutTrust<T extends TrustOpts>(o: T): Omit<T, (typeof TRUST_KEYS)[number]> {
  const out = { ...o } as Record<string, unknown>;
  for (const k of TRUST_KEYS) delete out[k];
  return out as Omit<T, (typeof TRUST_KEYS)[number]>;
}

function nodeCommands(cli: Command): void {
  trustOptions(cli.command('start'))
    .description(
      'Run the control plane on this machine: embedded PostgreSQL (PGlite) in --data-dir, both promoters, the coordinator, in-process workers, the API and status page; with a demo unless --no-demo',
    )
    .option('--data-dir <dir>', 'where the embedded database lives (state survives a restart); "memory" keeps nothing', './.rollout')
    .addOption(new Option('--port <port>', 'HTTP port').argParser(int('--port')).env('ROLLOUT_PORT').default(8000))
    .addOption(new Option('--host <host>', 'interface to listen on').env('ROLLOUT_HOST').default('127.0.0.1'))
    .option('--node-id <id>', 'this node', 'local-1')
    .option('--no-demo', 'start empty: no demo rollout or run')
    .option('--demo-items <n>', 'items in the demo run', int('--demo-items'), 300)
    .option('--demo-bake-seconds <s>', 'bake time of each demo stage', int('--demo-bake-seconds'), 3)
    .option('--workers <n>', 'in-process workers per open run', int('--workers'), 3)
    .option('--item-ms <ms>', 'mock backend: time per item', int('--item-ms'), 25)
    .option('--exit-after-demo', 'stop once the demo has finished', false)
    .option('--json', 'logs as JSON lines', false)
    .action(
      async (
        o: TrustOpts & {
          dataDir: string;
          port: number;
          host: string;
          nodeId: string;
          demo: boolean;
          demoItems: number;
          demoBakeSeconds: number;
          workers: number;
          itemMs: number;
          exitAfterDemo: boolean;
          json: boolean;
        },
      ) => {
        if (o.workers < 1) throw new UsageError('--workers must be at least 1');
        if (o.demoItems < 1) throw new UsageError('--demo-items must be at least 1');
        const logger = quiet(stderrLogger(o.json, 'rollout-node', { nodeId: o.nodeId }));
        // Loaded on use: the worker fleet's bundle of this command carries only what `worker` needs.
        const { startCommand } = await import('../node/node-command.js');
        await startCommand({ ...withoutTrust(o), dataDir: o.dataDir === 'memory' ? null : o.dataDir, trust: trustConfig(o) }, logger);
      },
    );
  trustOptions(cli.command('serve'))
    .description('Run a cluster node on PostgreSQL: membership, leader election, leader-only promoters and coordinators, the API, /metrics and the status page')
    .addOption(new Option('--node-id <id>', 'unique node id').env('CLUSTER_NODE_ID').makeOptionMandatory())
    .addOption(new Option('--hostname <name>', "this node's host name").env('CLUSTER_HOSTNAME'))
    .addOption(new Option('--port <port>', 'HTTP port').argParser(int('--port')).env('ROLLOUT_PORT').default(8000))
    .addOption(new Option('--host <host>', 'interface to listen on').env('ROLLOUT_HOST').default('127.0.0.1'))
    .addOption(new Option('--api-url <url>', 'the URL other nodes and clients reach this node at (default http://<host>:<port>)').env('ROLLOUT_API_URL'))
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL').makeOptionMandatory())
    .addOption(new Option('--elector <kind>', 'how the leader is chosen').choices(['lease', 'advisory-lock', 'static']).env('ROLLOUT_ELECTOR').default('lease'))
    .addOption(new Option('--lease-ttl <s>', 'leadership lease duration').argParser(seconds('--lease-ttl')).env('CLUSTER_LEASE_TTL').default(30))
    .addOption(
      new Option('--heartbeat-interval <s>', 'node heartbeat and lease renewal')
        .argParser(seconds('--heartbeat-interval'))
        .env('CLUSTER_HEARTBEAT_INTERVAL')
        .default(10),
    )
    .addOption(
      new Option('--election-interval <s>', 'how often a follower tries for the lease')
        .argParser(seconds('--election-interval'))
        .env('CLUSTER_ELECTION_INTERVAL')
        .default(5),
    )
    .addOption(
      new Option('--election-timeout <s>', 'a node silent this long is unhealthy')
        .argParser(seconds('--election-timeout'))
        .env('CLUSTER_ELECTION_TIMEOUT')
        .default(15),
    )
    .addOption(
      new Option('--monitor-interval <s>', 'cluster monitor (leader)').argParser(seconds('--monitor-interval')).env('CLUSTER_MONITOR_INTERVAL').default(15),
    )
    .addOption(new Option('--tick-interval <s>', 'BatchPromoter tick').argParser(seconds('--tick-interval')).env('ROLLOUT_TICK_INTERVAL'))
    .addOption(
      new Option('--scan-interval <s>', "run coordinators' failure scan (silent workers, unsent items, poison)")
        .argParser(seconds('--scan-interval'))
        .env('ROLLOUT_SCAN_INTERVAL')
        .default(5),
    )
    .addOption(new Option('--redirect-writes', 'followers answer writes with 307 to the leader instead of 503').env('ROLLOUT_REDIRECT_WRITES'))
    .addOption(
      new Option('--retain-rollouts <days>', 'a rollout that ended is deleted, whole, this many days after')
        .argParser(days('--retain-rollouts'))
        .env('ROLLOUT_RETAIN_ROLLOUTS_DAYS')
        .default(DEFAULT_RETENTION.rolloutDays),
    )
    .addOption(
      new Option('--retain-runs <days>', 'a finished run is deleted with its items and results this many days after')
        .argParser(days('--retain-runs'))
        .env('ROLLOUT_RETAIN_RUNS_DAYS')
        .default(DEFAULT_RETENTION.runDays),
    )
    .option('--json', 'logs as JSON lines', false)
    .action(
      async (
        o: TrustOpts & {
          retainRollouts: number;
          retainRuns: number;
          nodeId: string;
          hostname?: string;
          port: number;
          host: string;
          apiUrl?: string;
          databaseUrl: string;
          elector: 'lease' | 'advisory-lock' | 'static';
          leaseTtl: number;
          heartbeatInterval: number;
          electionInterval: number;
          electionTimeout: number;
          monitorInterval: number;
          tickInterval?: number;
          scanInterval: number;
          redirectWrites?: boolean | string;
          json: boolean;
        },
      ) => {
        const logger = stderrLogger(o.json, 'rollout-node', { nodeId: o.nodeId });
        const { serveCommand } = await import('../node/node-command.js');
        await serveCommand(
          {
            nodeId: o.nodeId,
            ...(o.hostname ? { hostname: o.hostname } : {}),
            host: o.host,
            port: o.port,
            ...(o.apiUrl ? { apiUrl: o.apiUrl } : {}),
            store: { kind: 'postgres', databaseUrl: o.databaseUrl },
            elector: o.elector,
            leaseTtlSeconds: o.leaseTtl,
            heartbeatIntervalSeconds: o.heartbeatInterval,
            electionIntervalSeconds: o.electionInterval,
            electionTimeoutSeconds: o.electionTimeout,
            monitorIntervalSeconds: o.monitorInterval,
            ...(o.tickInterval ? { tickIntervalSeconds: o.tickInterval } : {}),
            scanIntervalSeconds: o.scanInterval,
            retention: { rolloutDays: o.retainRollouts, runDays: o.retainRuns },
            redirectWrites: o.redirectWrites === true || o.redirectWrites === 'true' || o.redirectWrites === '1',
            ...trustConfig(o),
          },
          logger,
        );
      },
    );
}

/** Operator's steps straight on the store (no node or stack in between): what a runbook calls for. */
function storeCommands(cli: Command): void {
  cli
    .command('store')
    .description('Operator steps run straight on the store')
    .command('resend-pending')
    .description(
      "After a failover to another region: mark every Pending item of the runs as having no message, so the coordinator's next scan sends each one on this region's queue",
    )
    .option('--run <id...>', 'the runs (default: every open run)')
    .addOption(new Option('--store <kind>', 'where the ledger is').choices(['postgres', 'dynamodb']).env('ROLLOUT_STORE').makeOptionMandatory())
    .addOption(new Option('--database-url <url>', 'PostgreSQL connection string').env('DATABASE_URL'))
    .addOption(new Option('--table <name>', 'DynamoDB table').env('ROLLOUT_TABLE'))
    .action(async (o: { run?: string[]; store: 'postgres' | 'dynamodb'; databaseUrl?: string; table?: string }) => {
      if (o.store === 'postgres' && !o.databaseUrl) throw new UsageError('--database-url is required with --store postgres (or set DATABASE_URL)');
      if (o.store === 'dynamodb' && !o.table) throw new UsageError('--table is required with --store dynamodb (or set ROLLOUT_TABLE)');
      const { openStores } = await import('../../compose/stores.js');
      const stores = await openStores(
        o.store === 'postgres' ? { kind: 'postgres', connection: { connectionString: o.databaseUrl!, max: 2 } } : { kind: 'dynamodb', table: o.table! },
      );
      try {
        for (const runId of o.run ?? (await stores.ledger.openRuns())) {
          let marked = 0;
          for (let n = await stores.ledger.markUnsent(runId, 1_000); n > 0; n = await stores.ledger.markUnsent(runId, 1_000)) marked += n;
          process.stdout.write(`${runId}: ${marked} pending item${marked === 1 ? '' : 's'} marked unsent; the coordinator's next scan sends them\n`);
        }
      } finally {
        await stores.close();
      }
    });
}

function authCommands(cli: Command): void {
  cli
    .command('auth')
    .description('Credentials for nodes with authentication on')
    .command('token')
    .description('Print a new random token, and the line to add to the tokens file (--auth-tokens-file): only its hash is kept there')
    .requiredOption('--actor <name>', 'who the token acts as: recorded with every write it makes')
    .requiredOption('--scopes <scopes>', `what it may do, comma-separated: ${SCOPES.join(', ')}`)
    .option('--runs <ids>', 'a worker token: the runs it may ask work for, comma-separated, or * for any')
    .option('--worker <id>', 'a worker token: the worker id it may ask as, or a prefix ending in * (host-a-*)')
    .option('--json', 'print {token, line} as JSON', false)
    .action((o: { actor: string; scopes: string; runs?: string; worker?: string; json: boolean }) => {
      const binding = {
        ...(o.runs !== undefined ? { runs: o.runs === '*' ? ('any' as const) : o.runs.split(',').map((r) => r.trim()) } : {}),
        ...(o.worker !== undefined ? { worker: o.worker } : {}),
      };
      const { token, line } = mintToken(o.actor, parseScopes(o.scopes, '--scopes'), binding);
      process.stdout.write(
        o.json ? `${JSON.stringify({ token, line })}\n` : `token (shown once; give it to ${o.actor}):\n${token}\n\nline for the tokens file:\n${line}\n`,
      );
    });
}

/** `npm start` keeps the terminal for its progress: only warnings and errors are logged. */
function quiet(logger: Logger): Logger {
  return { ...logger, info: () => undefined };
}

/** The options every client command takes: where the control plane is, and output as JSON. */
function target(cmd: Command): Command {
  return cmd
    .addOption(
      new Option('--url <url>', 'the control plane: a local node, a load balancer, or the deployed API URL')
        .env('ROLLOUT_URL')
        .default('http://127.0.0.1:8000'),
    )
    .addOption(
      new Option('--aws-region <region>', 'sign requests with SigV4 for the deployed HTTP API in this region (credentials from the AWS chain)').env(
        'ROLLOUT_AWS_REGION',
      ),
    )
    .addOption(new Option('--token <token>', 'a bearer token for a node with authentication on: ours (rollout auth token) or an OIDC JWT').env('ROLLOUT_TOKEN'))
    .addOption(new Option('--ca-file <pem>', "the CA a node's HTTPS certificate chains to, when the system does not trust it").env('ROLLOUT_CA_FILE'))
    .option(
      '--actor <name>',
      'who is acting, for a node with authentication off (with it on, the credential names you; the deployed API uses your IAM identity)',
    )
    .option('--json', 'print the response as JSON', false);
}

type ClientOpts = { url: string; awsRegion?: string; actor?: string; token?: string; caFile?: string; json: boolean };

function table(rows: Record<string, unknown>[], columns: string[]): string {
  const cell = (v: unknown): string => (v === null || v === undefined ? '-' : typeof v === 'string' ? v : JSON.stringify(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(own(r, c)).length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...rows.map((r) => line(columns.map((c) => cell(own(r, c)))))].join('\n');
}

function readPem(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${errorMessage(err)}`);
  }
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

function targetOf(o: ClientOpts, sign?: { reporter: string; secret: string }): Target {
  return {
    url: o.url,
    ...(o.awsRegion ? { awsRegion: o.awsRegion } : {}),
    ...(o.actor ? { actor: o.actor } : {}),
    ...(o.token ? { token: o.token } : {}),
    ...(o.caFile ? { ca: readPem(o.caFile) } : {}),
    ...(sign ? { sign } : {}),
  };
}

async function run(
  o: ClientOpts,
  method: string,
  path: string,
  body: unknown,
  human: (r: unknown) => string,
  sign?: { reporter: string; secret: string },
): Promise<void> {
  const res = await call(targetOf(o, sign), method, path, body);
  process.stdout.write(`${o.json ? JSON.stringify(res, null, 2) : human(res)}\n`);
}

type Status = { node_id: string; is_leader: boolean; leader: { leader_id: string; term: number; expires_at: string } | null };
const leaderLine = (l: Status['leader']) => (l ? `${l.leader_id} (epoch ${l.term}, lease until ${l.expires_at})` : 'none elected');
/** What each target was asked to carry and what it was last found carrying. */
const actuationTable = (rows: readonly ActuationJson[]) =>
  table(
    rows.map((a) => ({
      target: a.target,
      kind: a.kind,
      state: a.state,
      applied: a.final ? 'final' : `${a.percent}%`,
      found: a.observed ? (a.observed.final ? 'final' : `${a.observed.percent}%`) : '-',
      at: a.appliedAt ?? '-',
      reason: a.reason ?? '',
    })),
    ['target', 'kind', 'state', 'applied', 'found', 'at', 'reason'],
  );
const stagesLine = (r: RolloutJson) => r.stages.map((s) => `${s.name}:${s.phase}`).join(' ');

/** One provider gate: its state in the stage's current period, what it asks, and its newest readings. */
function gateLines(g: GateJson, stage: string): string {
  const limits = `failureLimit ${g.failureLimit}, inconclusiveLimit ${g.inconclusiveLimit}`;
  const passWhen = g.comparison === null ? 'fails while an alarm is in ALARM' : `passes when value ${g.comparison} ${g.threshold}`;
  const head = `\ngate ${g.name} (${g.type}, stage ${stage}): ${g.status} · ${g.counts.readings} readings, ${g.counts.failures} failed, ${g.counts.inconclusive} inconclusive (${limits}) · ${passWhen}\n  ${g.query}`;
  const rows = (g.readings ?? (g.last ? [g.last] : []))
    .slice(0, 10)
    .map((r) => ({ at: new Date(r.at).toISOString(), outcome: r.outcome, value: r.value, source: r.source, reason: r.reason }));
  return rows.length ? `${head}\n${table(rows, ['at', 'outcome', 'value', 'source', 'reason']).replace(/^/gm, '  ')}` : `${head}\n  no readings yet`;
}

function clientCommands(cli: Command): void {
  const statusAction = (o: ClientOpts) =>
    run(o, 'GET', '/cluster/status', undefined, (r) => {
      const s = r as Status;
      return `node ${s.node_id}${s.is_leader ? ' (leader)' : ''}\nleader ${leaderLine(s.leader)}`;
    });
  target(cli.command('status').description('The control plane at a glance: this node and the leader')).action(statusAction);
  const cluster = cli.command('cluster').description('Cluster membership and leadership');
  target(cluster.command('status').description('This node and the leader')).action(statusAction);
  target(cluster.command('leader').description('The current leader')).action((o: ClientOpts) =>
    run(o, 'GET', '/cluster/leader', undefined, (r) => leaderLine(r as Status['leader'])),
  );
  target(cluster.command('events').description('The newest cluster events (a node only)').option('--limit <n>', 'how many, 1–500', int('--limit'), 20)).action(
    (o: ClientOpts & { limit: number }) =>
      run(o, 'GET', `/cluster/events?limit=${o.limit}`, undefined, (r) =>
        table(
          (r as { events: { timestamp: string; node_id: string; event_type: string; event_data: Record<string, unknown> | null }[] }).events.map((e) => ({
            time: e.timestamp,
            node: e.node_id,
            event: e.event_type,
            details: Object.entries(e.event_data ?? {})
              .filter(([k]) => k !== 'at')
              .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
              .join(' '),
          })),
          ['time', 'node', 'event', 'details'],
        ),
      ),
  );

  const rollouts = cli.command('rollouts').description('Progressive rollouts');
  target(
    rollouts
      .command('create')
      .description('Create a rollout from a spec file (JSON)')
      .requiredOption('--file <spec.json>', 'the rollout spec')
      .option('--id <id>', 'an id of your own (idempotent)'),
  ).action((o: ClientOpts & { file: string; id?: string }) =>
    run(
      o,
      'POST',
      '/rollouts',
      { spec: readJsonFile(o.file), ...(o.id ? { id: o.id } : {}) },
      (r) => `${(r as { created: boolean }).created ? 'created' : 'exists'} ${(r as { id: string }).id}`,
    ),
  );
  target(
    rollouts
      .command('list')
      .description('The running rollouts; with --state, every rollout (or those in a state), newest first, a page at a time')
      .addOption(
        new Option('--state <state>', 'all, or running, paused, completed, rolled_back, aborted').choices([
          'all',
          'running',
          'paused',
          'completed',
          'rolled_back',
          'aborted',
        ]),
      )
      .option('--limit <n>', 'with --state: rollouts in the page, 1–500', int('--limit'))
      .option('--cursor <cursor>', "with --state: the previous page's next"),
  ).action((o: ClientOpts & { state?: string; limit?: number; cursor?: string }) => {
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
  });
  const rolloutText = (x: RolloutJson) =>
    [
      `${x.id}  ${x.state}${x.stateReason ? `  (${x.stateReason})` : ''}`,
      table(
        x.stages.map((st) => ({ ...st })),
        ['name', 'phase'],
      ),
      ...(x.gates ?? []).map((g) => gateLines(g, x.stages[g.stage]?.name ?? String(g.stage))),
      ...(x.actuation?.length ? [actuationTable(x.actuation)] : []),
    ].join('\n');
  target(
    rollouts
      .command('get')
      .description('One rollout')
      .argument('<id>')
      .option('--watch', 'redraw it as it changes until it ends (Ctrl-C stops watching)', false)
      .option('--poll <duration>', '--watch: read it this often', duration('--poll'), 2_000),
  ).action(async (id: string, o: ClientOpts & { watch: boolean; poll: number }) => {
    if (!o.watch) return run(o, 'GET', `/rollouts/${encodeURIComponent(id)}`, undefined, (r) => rolloutText(r as RolloutJson));
    const tty = process.stdout.isTTY;
    // On a terminal the view is redrawn in place; into a file or a pipe, each change is appended.
    await new RolloutClient(targetOf(o)).waitForRollout(id, {
      pollMs: o.poll,
      onChange: (r) =>
        process.stdout.write(
          o.json ? `${JSON.stringify(r)}\n` : `${tty ? '\x1b[2J\x1b[H' : ''}${new Date().toISOString()}\n${rolloutText(r)}\n${tty ? '' : '\n'}`,
        ),
    });
  });
  target(rollouts.command('history').description('Every transition of a rollout, oldest first: what, when, who, why').argument('<id>')).action(
    (id: string, o: ClientOpts) =>
      run(o, 'GET', `/rollouts/${encodeURIComponent(id)}/history`, undefined, (r) =>
        table(
          (r as { history: HistoryEntryJson[] }).history.map((h) => ({
            at: h.at,
            event: h.type.replace(/^ai\.rollout\./, ''),
            stage: h.stage ? `${h.stage.name} ${h.stage.percent}%` : '',
            actor: h.actor,
            epoch: h.epoch,
            reason: h.reason ?? '',
          })),
          ['at', 'event', 'stage', 'actor', 'epoch', 'reason'],
        ),
      ),
  );
  target(
    rollouts
      .command('status')
      .description('Wait until a rollout ends: exit 0 completed, 1 rolled back or aborted, 3 still going at --timeout (for CI pipelines)')
      .argument('<id>')
      .option('--timeout <duration>', 'give up after this long (30m, 90s, 2h; default: wait for good)', duration('--timeout'))
      .option('--poll <duration>', 'read the rollout this often', duration('--poll'), 2_000),
  ).action(async (id: string, o: ClientOpts & { timeout?: number; poll: number }) => {
    const client = new RolloutClient(targetOf(o));
    // Progress on stderr, one line per change; the outcome on stdout.
    const progress = (r: RolloutJson) => process.stderr.write(`${new Date().toISOString()}  ${r.id}  ${r.state}  attempt ${r.attempt}  ${stagesLine(r)}\n`);
    let ended: RolloutJson;
    try {
      ended = await client.waitForRollout(id, {
        pollMs: o.poll,
        onChange: o.json ? () => undefined : progress,
        ...(o.timeout !== undefined ? { timeoutMs: o.timeout } : {}),
      });
    } catch (err) {
      if (!(err instanceof RolloutWaitTimeoutError)) throw err;
      process.stdout.write(
        o.json
          ? `${JSON.stringify({ ...err.last, timedOut: true }, null, 2)}\n`
          : `${id}  ${err.last.state}: not ended after ${Math.round((o.timeout ?? 0) / 1000)} s\n`,
      );
      throw new ExitCode(3);
    }
    process.stdout.write(o.json ? `${JSON.stringify(ended, null, 2)}\n` : `${id}  ${ended.state}${ended.stateReason ? `  (${ended.stateReason})` : ''}\n`);
    if (ended.state !== 'completed') throw new ExitCode(1);
  });
  for (const command of COMMANDS) {
    target(
      rollouts.command(command).description(`${command} a rollout (needs the leader)`).argument('<id>').option('--reason <text>', 'recorded with the change'),
    ).action((id: string, o: ClientOpts & { reason?: string }) =>
      run(o, 'POST', `/rollouts/${encodeURIComponent(id)}/${command}`, o.reason ? { reason: o.reason } : {}, (r) => {
        const a = (r as { action: { transition: string; applied: boolean; events: string[] } }).action;
        return `${a.transition}: ${a.applied ? 'applied' : 'not applied'}${a.events.length ? ` (${a.events.join(', ')})` : ''}`;
      }),
    );
  }

  const events = cli.command('events').description('Rollout signals (the StreamingPromoter acts on them at once)');
  target(
    events
      .command('publish')
      .description('Send a rollout signal: to a node (POST /events), or with --event-bus to the deployed EventBridge bus')
      .requiredOption('--type <type>', `one of ${ROLLOUT_SIGNAL_TYPES.join(', ')}`)
      .option('--rollout <id>', 'the rollout (rolloutId)')
      .option('--stage <index|name>', 'metrics: the stage')
      .option('--requests <n>', 'metrics: requests so far in the stage (cumulative)', int('--requests'))
      .option('--errors <n>', 'metrics: errors so far in the stage (cumulative)', int('--errors'))
      .option('--p99-ms <ms>', 'metrics: p99 latency', (v) => Number(v))
      .option('--alarm <name>', 'alarm_changed: the alarm')
      .option('--state <OK|ALARM|INSUFFICIENT_DATA>', 'alarm_changed: its state')
      .option('--data <json>', 'further fields of the event, as JSON')
      .option('--signer <reporter>', 'sign the signal as this reporter (Rollout-Signature) instead of sending a token; the secret from ROLLOUT_SIGNING_SECRET')
      .addOption(
        new Option('--event-bus <name>', 'publish to this EventBridge bus (region and credentials from the AWS chain) instead of a node').env(
          'ROLLOUT_EVENT_BUS',
        ),
      ),
  ).action(
    async (
      o: ClientOpts & {
        type: string;
        rollout?: string;
        stage?: string;
        requests?: number;
        errors?: number;
        p99Ms?: number;
        alarm?: string;
        state?: string;
        data?: string;
        eventBus?: string;
        signer?: string;
      },
    ) => {
      let extra: Record<string, unknown> = {};
      if (o.data) {
        try {
          extra = JSON.parse(o.data) as Record<string, unknown>;
        } catch (err) {
          throw new UsageError(`--data is not JSON: ${errorMessage(err)}`);
        }
      }
      const now = new Date().toISOString();
      const fields: Record<string, unknown> = {
        ...(o.rollout ? { rolloutId: o.rollout } : {}),
        ...(o.stage !== undefined ? { stage: /^\d+$/.test(o.stage) ? Number(o.stage) : o.stage } : {}),
        ...(o.requests !== undefined ? { requests: o.requests } : {}),
        ...(o.errors !== undefined ? { errors: o.errors } : {}),
        ...(o.p99Ms !== undefined ? { p99LatencyMs: o.p99Ms } : {}),
        ...(o.alarm ? { alarm: o.alarm } : {}),
        ...(o.state ? { state: o.state } : {}),
        ...(o.type === 'rollout.metrics_reported' ? { observedAt: now } : {}),
        ...(o.type === 'rollout.alarm_changed' ? { changedAt: now } : {}),
        ...extra,
      };
      // Checked here too, so a bad event is refused before it leaves (the bus would only dead-letter it).
      const event = { type: o.type, ...fields };
      try {
        parseInboundEvent(event);
      } catch (err) {
        if (err instanceof InvalidEventError) throw new UsageError(err.message);
        throw err;
      }
      if (o.eventBus) {
        const { type, ...detail } = event;
        const { EventBridgeClient, PutEventsCommand } = await import('@aws-sdk/client-eventbridge');
        const res = await new EventBridgeClient({}).send(
          new PutEventsCommand({ Entries: [{ EventBusName: o.eventBus, Source: 'rollout.cli', DetailType: type, Detail: JSON.stringify(detail) }] }),
        );
        if (res.FailedEntryCount)
          throw new Error(`EventBridge refused the event: ${res.Entries?.[0]?.ErrorCode ?? ''} ${res.Entries?.[0]?.ErrorMessage ?? ''}`);
        process.stdout.write(
          o.json ? `${JSON.stringify({ eventId: res.Entries?.[0]?.EventId })}\n` : `published ${type} to ${o.eventBus} (${res.Entries?.[0]?.EventId ?? ''})\n`,
        );
        return;
      }
      let sign: { reporter: string; secret: string } | undefined;
      if (o.signer) {
        const secret = process.env.ROLLOUT_SIGNING_SECRET;
        if (!secret) throw new UsageError("--signer needs the reporter's secret in ROLLOUT_SIGNING_SECRET");
        sign = { reporter: o.signer, secret };
      }
      await run(
        o,
        'POST',
        '/events',
        event,
        (r) => {
          const x = r as { stored: string; evaluated: boolean; actions: { transition: string; applied: boolean }[] };
          const acts = x.actions.filter((a) => a.applied).map((a) => a.transition);
          return `accepted (${x.stored})${x.evaluated ? `; evaluated${acts.length ? `: ${acts.join(', ')}` : ', no change'}` : '; this node does not lead: the leader evaluates it within one tick'}`;
        },
        sign,
      );
    },
  );

  const specs = cli.command('spec').description('Rollout specs and run requests, checked before they are sent');
  specs
    .command('schema')
    .description('Print the JSON Schema (draft 2020-12) of a rollout spec, or of a run request (POST /runs): for editors and CI')
    .addOption(new Option('--kind <kind>', 'which').choices(['rollout', 'run']).default('rollout'))
    .action(async (o: { kind: 'rollout' | 'run' }) => {
      // Loaded on use, as the node's commands are: the worker's bundle of this command stays lean.
      const schema =
        o.kind === 'run' ? (await import('../../api/handler.js')).runRequestJsonSchema() : (await import('../../rollout/spec.js')).rolloutSpecJsonSchema();
      process.stdout.write(`${JSON.stringify(schema, null, 2)}\n`);
    });
  specs
    .command('check')
    .description('Check a rollout spec as the API would, and print the stages it expands to (exit 2 naming each bad field)')
    .requiredOption('--file <spec.json>', 'the spec')
    .action(async (o: { file: string }) => {
      const { parseRolloutSpec } = await import('../../rollout/spec.js');
      const spec = parseRolloutSpec(readJsonFile(o.file));
      const gates = (g: (typeof spec.stages)[number]['gates']) =>
        [
          g.maxErrorRate !== undefined ? `errors ≤ ${g.maxErrorRate * 100}%` : '',
          g.maxP99LatencyMs !== undefined ? `p99 ≤ ${g.maxP99LatencyMs} ms` : '',
          g.minRequests ? `≥ ${g.minRequests} requests` : '',
          ...g.alarms.map((a) => `alarm ${a}`),
          ...(g.providers ?? []).map((p) => `${p.type} ${p.name}`),
        ]
          .filter(Boolean)
          .join(', ') || '-';
      process.stdout.write(
        `${spec.target.service} ${spec.target.version}: ${spec.stages.length} stages\n${table(
          spec.stages.map((st) => ({ stage: st.name, percent: st.percent, bake: `${st.bakeSeconds}s`, gates: gates(st.gates) })),
          ['stage', 'percent', 'bake', 'gates'],
        )}\n`,
      );
    });

  const runs = cli.command('runs').description('Work runs');
  target(
    runs
      .command('create')
      .description(
        'Create a run from a file: JSON (an array of payloads, or {"items": [...], "spec": {...}}) or JSON Lines (.jsonl/.ndjson: one payload a line, read as it is sent); any number of items, sent 10,000 a request and paced to what the control plane accepts',
      )
      .requiredOption('--file <items.json|items.jsonl>', 'the items')
      .option('--id <id>', 'an id of your own (idempotent)')
      .option('--spec <spec.json>', "the run's spec, for a JSON Lines file")
      .option('--shards <n>', "the run's shards, for a JSON Lines file", int('--shards')),
  ).action(async (o: ClientOpts & { file: string; id?: string; spec?: string; shards?: number }) => {
    let body: Record<string, unknown>;
    if (/\.(jsonl|ndjson)$/i.test(o.file)) {
      body = { items: jsonLines(o.file), ...(o.spec ? { spec: readJsonFile(o.spec) } : {}), ...(o.shards !== undefined ? { shards: o.shards } : {}) };
    } else {
      if (o.spec || o.shards !== undefined) throw new UsageError(`--spec and --shards go with a JSON Lines file; ${o.file} carries its own ("spec", "shards")`);
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
    process.stdout.write(o.json ? `${JSON.stringify(r, null, 2)}\n` : `${r.created ? 'created' : 'exists'} ${r.id}: ${r.items} items, ${r.added} new${more}\n`);
  });
  target(
    runs
      .command('list')
      .description('Runs, newest first, a page at a time')
      .option('--limit <n>', 'runs in the page, 1–500', int('--limit'), 50)
      .option('--cursor <cursor>', "the previous page's next"),
  ).action((o: ClientOpts & { limit: number; cursor?: string }) =>
    run(o, 'GET', `/runs?${new URLSearchParams({ limit: String(o.limit), ...(o.cursor ? { cursor: o.cursor } : {}) }).toString()}`, undefined, (r) => {
      const page = r as RunsPage;
      return `${table(
        page.runs.map((x) => ({ id: x.id, created: x.createdAt, shards: x.shards ?? '-', cancelled: x.cancelled ? x.cancelled.at : '' })),
        ['id', 'created', 'shards', 'cancelled'],
      )}${page.next ? `\nmore: --cursor ${page.next}` : ''}`;
    }),
  );
  target(
    runs
      .command('items')
      .description("A page of a run's items: state, attempts, worker, and why it failed")
      .argument('<id>')
      .addOption(new Option('--state <state>', 'only items in this state').choices(['pending', 'running', 'done', 'failed']))
      .option('--limit <n>', 'items in the page, 1–1000', int('--limit'), 100)
      .option('--cursor <cursor>', "the previous page's next"),
  ).action((id: string, o: ClientOpts & { state?: ItemState; limit: number; cursor?: string }) =>
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
  );
  target(
    runs.command('results').description('Every done item of a run and its result, one JSON line each ({"id", "result"}), all pages').argument('<id>'),
  ).action(async (id: string, o: ClientOpts) => {
    for await (const item of new RolloutClient(targetOf(o)).allRunItems(id, { state: 'done' }))
      process.stdout.write(`${JSON.stringify({ id: item.id, result: item.result })}\n`);
  });
  target(
    runs
      .command('cancel')
      .description('Cancel a run: its pending items fail ("cancelled"), running ones end as they finish, and it takes no more items')
      .argument('<id>')
      .option('--reason <text>', "why (kept with the run and in each failed item's reason)"),
  ).action((id: string, o: ClientOpts & { reason?: string }) =>
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
  );
  target(runs.command('status').description('Items per state').argument('<id>')).action((id: string, o: ClientOpts) =>
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
  );
}

export async function main(argv: readonly string[]): Promise<number> {
  try {
    await program().parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (err instanceof ExitCode) return err.code;
    if (code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help') return 0;
    if (typeof code === 'string' && code.startsWith('commander.')) return 2;
    process.stderr.write(`rollout: ${errorMessage(err)}\n`);
    if (err instanceof UsageError) return 2;
    if (err instanceof ApiError) return err.status === 400 ? 2 : 1;
    return err instanceof ConfigError ? 2 : 1;
  }
}

// Through npm's bin link the script is named by the link: compared by real path.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  // A reader that went away (a pipe into `head`, a supervisor that closed its end) is not a crash of a node or worker: what it would have read is dropped.
  for (const out of [process.stdout, process.stderr]) {
    out.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
    });
  }
  // Exit explicitly: idle keep-alive sockets of the AWS SDK would hold the process open.
  process.exit(await main(process.argv.slice(2)));
}
