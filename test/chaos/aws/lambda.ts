/**
 * Lambda, as far as a chaos schedule needs it: each function of a stack is a
 * pool of sandbox processes (lambda-runtime.ts). An invocation goes to an idle
 * sandbox, or a new one (a cold start), so concurrent invocations run in
 * different processes, as in AWS; at the function's concurrency limit it is
 * refused (throttled), never queued. A sandbox that runs past the function's
 * time-out is killed with SIGKILL, as Lambda does; so is one the nemesis
 * kills. Either way its invocation's outcome is unknown to the caller: the
 * handler may have written anything before it died.
 *
 * `InvokeEndpoint` serves the Lambda Invoke API (RequestResponse) over HTTP,
 * so processes that call a function through the unmodified SDK (a worker's
 * LambdaCoordinatorClient) reach these pools through AWS_ENDPOINT_URL_LAMBDA.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { closeNow, listenOnLoopback, withBody } from '../../support/local-server.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const root = resolve(here, '../../..');
const RUNTIME = join(here, 'lambda-runtime.ts');

export type InvokeOutcome =
  | { readonly status: 'ok'; readonly result: unknown; readonly sandbox: string }
  | { readonly status: 'error'; readonly error: string; readonly sandbox: string }
  /** The sandbox died mid-invocation: killed by the nemesis, timed out, or exited on its own. */
  | { readonly status: 'killed' | 'timeout' | 'exited'; readonly detail: string; readonly sandbox: string }
  /** Refused before it ran: every sandbox the function may have is busy (Lambda's TooManyRequestsException). */
  | { readonly status: 'throttled'; readonly detail: string; readonly sandbox: null };

export interface FunctionOptions {
  /** The stack's node identity (the lease holder of every invocation of its functions). */
  readonly stack: string;
  /** Short name used in process names, e.g. `stack-a`. */
  readonly stackTag: string;
  readonly name: string;
  /**
   * How its sandboxes name themselves to the store proxy (the SDK's user agent
   * app id, `<prefix>.<n>`): short, because the SDK allows 50 characters and
   * Powertools appends its own marker.
   */
  readonly appPrefix: string;
  /** The handler module, relative to the project root (`functions/coordinator.ts`). */
  readonly module: string;
  readonly env: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly maxSandboxes: number;
  /** Sandboxes kept started (provisioned concurrency): one that dies is replaced in the background, off any invocation's path. */
  readonly warmSandboxes: number;
  /** Extra `--import` flags for each sandbox, after tsx's (a variant loader: hooks registered later run first). */
  readonly imports: readonly string[];
  readonly logDir: string;
  /** Told when a sandbox process starts and ends (for the history's process spans). */
  readonly onProcess: (name: string, event: 'start' | 'end', end?: 'killed' | 'stopped' | 'exited' | 'crashed') => void;
}

interface Pending {
  readonly id: number;
  readonly resolve: (o: InvokeOutcome) => void;
  readonly timer: NodeJS.Timeout;
}

class Sandbox {
  readonly proc: ChildProcess;
  readonly ready: Promise<void>;
  pending: Pending | null = null;
  alive = true;
  /** Why it is being killed, so its invocation's outcome says so. */
  killedFor: 'killed' | 'timeout' | 'stopped' | null = null;

  constructor(
    readonly name: string,
    readonly appId: string,
    o: FunctionOptions,
    exited: (s: Sandbox, code: number | null, signal: NodeJS.Signals | null) => void,
  ) {
    const log = openSync(join(o.logDir, `${appId}.log`), 'a');
    this.proc = spawn(process.execPath, ['--import', 'tsx', ...o.imports.flatMap((i) => ['--import', i]), RUNTIME, resolve(root, o.module)], {
      cwd: root,
      env: { ...process.env, ...o.env, AWS_SDK_UA_APP_ID: appId, AWS_LAMBDA_FUNCTION_NAME: o.name, ROLLOUT_NODE_ID: o.stack, CHAOS_PROCESS: name },
      stdio: ['ignore', log, log, 'ipc'],
    });
    closeSync(log);
    let ready!: () => void;
    let failed!: (err: Error) => void;
    this.ready = new Promise<void>((r, f) => ((ready = r), (failed = f)));
    // A sandbox killed while it starts (a nemesis, a stop) may have nobody awaiting its start: not an unhandled rejection.
    this.ready.catch(() => undefined);
    this.proc.on('message', (m: { type: string; id?: number; ok?: boolean; result?: unknown; error?: { name: string; message: string } }) => {
      if (m.type === 'ready') ready();
      if (m.type !== 'result' || !this.pending || this.pending.id !== m.id) return;
      const p = this.pending;
      this.pending = null;
      clearTimeout(p.timer);
      p.resolve(
        m.ok ? { status: 'ok', result: m.result, sandbox: this.name } : { status: 'error', error: `${m.error!.name}: ${m.error!.message}`, sandbox: this.name },
      );
    });
    this.proc.on('exit', (code, signal) => {
      this.alive = false;
      failed(new Error(`sandbox ${name} exited before it was ready (code ${code}, signal ${signal}); see ${join(o.logDir, `${appId}.log`)}`));
      const p = this.pending;
      this.pending = null;
      if (p) {
        clearTimeout(p.timer);
        const status = this.killedFor === 'timeout' || this.killedFor === 'killed' ? this.killedFor : 'exited';
        p.resolve({
          status,
          detail: status === 'timeout' ? 'Task timed out' : signal ? `Runtime exited with signal: ${signal}` : `Runtime exited with code ${code}`,
          sandbox: this.name,
        });
      }
      exited(this, code, signal);
    });
  }

  kill(reason: 'killed' | 'timeout' | 'stopped'): void {
    if (!this.alive) return;
    this.killedFor = reason;
    this.proc.kill('SIGKILL');
  }
}

export class LambdaFunction {
  private readonly sandboxes = new Set<Sandbox>();
  private spawned = 0;
  private nextId = 0;
  /** Invocations in flight. */
  inFlight = 0;
  invocations = 0;

  constructor(readonly o: FunctionOptions) {}

  get label(): string {
    return `${this.o.stackTag}/${this.o.name}`;
  }

  /** Start the warm sandboxes ahead of the first invocations. */
  async warm(): Promise<void> {
    const fresh = Array.from({ length: Math.max(0, this.o.warmSandboxes - this.sandboxes.size) }, () => this.spawn());
    await Promise.all(fresh.map((s) => s.ready.catch(() => undefined)));
  }

  private stopping = false;

  /** Sandboxes running an invocation now. */
  busy(): string[] {
    return [...this.sandboxes].filter((s) => s.pending).map((s) => s.appId);
  }

  /** Kill a sandbox of this function by its app id (the name the store proxy sees); resolves once it is gone. */
  async kill(appId: string, reason: 'killed' | 'timeout' = 'killed'): Promise<boolean> {
    const s = [...this.sandboxes].find((x) => x.appId === appId);
    if (!s || !s.alive) return false;
    const gone = new Promise<void>((r) => s.proc.once('exit', () => r()));
    s.kill(reason);
    await gone;
    return true;
  }

  async invoke(event: unknown, o: { timeoutMs?: number } = {}): Promise<InvokeOutcome> {
    this.inFlight++;
    this.invocations++;
    try {
      const sandbox = await this.acquire();
      if (!sandbox) return { status: 'throttled', detail: `TooManyRequestsException: Rate Exceeded (${this.o.maxSandboxes} sandboxes busy)`, sandbox: null };
      const id = ++this.nextId;
      const timeoutMs = o.timeoutMs ?? this.o.timeoutMs;
      return await new Promise<InvokeOutcome>((done) => {
        const timer = setTimeout(() => sandbox.kill('timeout'), timeoutMs);
        sandbox.pending = { id, resolve: done, timer };
        // The sandbox may be dying (its channel closed before its 'exit' arrived): its exit settles this invocation.
        sandbox.proc.send({ id, event, deadline: Date.now() + timeoutMs }, (err) => {
          if (err && sandbox.proc.exitCode === null && sandbox.proc.signalCode === null) sandbox.proc.kill('SIGKILL');
        });
      });
    } finally {
      this.inFlight--;
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const all = [...this.sandboxes];
    for (const s of all) s.kill('stopped');
    await Promise.all(
      all.map((s) => (s.proc.exitCode !== null || s.proc.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => s.proc.once('exit', () => r())))),
    );
  }

  private spawn(): Sandbox {
    const n = ++this.spawned;
    const appId = `${this.o.appPrefix}.${n}`;
    const name = `${this.o.stackTag}/${this.o.name}#${n}`;
    const s = new Sandbox(name, appId, this.o, (dead, code, signal) => {
      this.sandboxes.delete(dead);
      this.o.onProcess(name, 'end', dead.killedFor === 'stopped' ? 'stopped' : dead.killedFor ? 'killed' : signal || code ? 'crashed' : 'exited');
      if (!this.stopping && this.sandboxes.size < this.o.warmSandboxes) this.spawn();
    });
    this.sandboxes.add(s);
    this.o.onProcess(name, 'start');
    return s;
  }

  /** An idle sandbox, or a new one while the function is under its concurrency; null when it is at it (no queue: Lambda throttles). */
  private async acquire(): Promise<Sandbox | null> {
    for (let coldFailures = 0; ;) {
      const idle = [...this.sandboxes].find((s) => s.alive && !s.pending && !this.claimed.has(s));
      if (idle) {
        this.claimed.add(idle);
        try {
          await idle.ready;
        } catch {
          this.claimed.delete(idle);
          continue;
        }
        this.claimed.delete(idle);
        if (idle.alive) return idle;
        continue;
      }
      if (this.sandboxes.size < this.o.maxSandboxes) {
        const s = this.spawn();
        this.claimed.add(s);
        try {
          await s.ready;
        } catch (err) {
          // A sandbox that cannot start (a broken module) would otherwise be respawned forever; one killed on purpose is not that.
          if (s.killedFor === null && ++coldFailures >= 3) throw err;
          continue;
        } finally {
          this.claimed.delete(s);
        }
        if (s.alive) return s;
        continue;
      }
      return null;
    }
  }

  /** Sandboxes handed to an invocation that has not sent it yet (waiting for a cold start). */
  private readonly claimed = new Set<Sandbox>();
}

/** The Lambda Invoke API (synchronous) over the pools, by function name. */
export class InvokeEndpoint {
  private server: Server | undefined;
  url = '';

  constructor(private readonly call: (functionName: string, event: unknown) => Promise<InvokeOutcome>) {}

  async start(): Promise<this> {
    this.server = createServer(
      withBody((req, res, body) => {
        const m = /^\/2015-03-31\/functions\/([^/]+)\/invocations/.exec(req.url ?? '');
        if (!m) {
          res
            .writeHead(404, { 'content-type': 'application/json', 'x-amzn-errortype': 'ResourceNotFoundException' })
            .end(JSON.stringify({ Type: 'User', message: `no route ${req.url}` }));
          return;
        }
        const name = decodeURIComponent(m[1]!).split(':').at(-1)!;
        let event: unknown;
        try {
          event = JSON.parse(body.toString('utf8') || '{}');
        } catch {
          res
            .writeHead(400, { 'content-type': 'application/json', 'x-amzn-errortype': 'InvalidRequestContentException' })
            .end(JSON.stringify({ Type: 'User', message: 'Could not parse request body into json' }));
          return;
        }
        this.call(name, event).then(
          (out) => {
            if (out.status === 'ok') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out.result));
            else {
              if (out.status === 'throttled') {
                res
                  .writeHead(429, { 'content-type': 'application/json', 'x-amzn-errortype': 'TooManyRequestsException' })
                  .end(JSON.stringify({ Type: 'User', message: out.detail, Reason: 'ReservedFunctionConcurrentInvocationLimitExceeded' }));
                return;
              }
              const error =
                out.status === 'error'
                  ? { errorType: out.error.split(':')[0], errorMessage: out.error }
                  : { errorType: out.status === 'timeout' ? 'Sandbox.Timedout' : 'Runtime.ExitError', errorMessage: out.detail };
              res.writeHead(200, { 'content-type': 'application/json', 'x-amz-function-error': 'Unhandled' }).end(JSON.stringify(error));
            }
          },
          (err: unknown) =>
            res
              .writeHead(500, { 'content-type': 'application/json', 'x-amzn-errortype': 'ServiceException' })
              .end(JSON.stringify({ Type: 'Service', message: String(err) })),
        );
      }),
    );
    this.url = await listenOnLoopback(this.server);
    return this;
  }

  async stop(): Promise<void> {
    await closeNow(this.server);
  }
}
