/**
 * Work-run workers as real processes: `rollout worker` (the project's own
 * command) against the table through the observing proxy, SQS on fauxqs, and
 * the coordinator Lambda through the Invoke endpoint. Each worker slot of a
 * run keeps one worker alive, as a spot fleet would: a worker killed by the
 * nemesis comes back as a new worker on the same instance (a restarted
 * process); a worker that drained on a spot notice is replaced by a new
 * worker on a new instance.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const root = resolve(here, '../../..');
const CLI = resolve(root, 'shared/runtimes/cli/cli.ts');

export interface FleetOptions {
  readonly env: Readonly<Record<string, string>>;
  readonly table: string;
  readonly queueUrl: string;
  /** The harness's execution backend (backend.ts). */
  readonly backendUrl: string;
  readonly heartbeatMs: number;
  readonly visibilitySeconds: number;
  readonly imports: readonly string[];
  readonly logDir: string;
  readonly salt: string;
  readonly onProcess: (name: string, event: 'start' | 'end', end?: 'killed' | 'stopped' | 'exited' | 'crashed') => void;
  readonly log: (line: string) => void;
}

export interface Slot {
  readonly key: string;
  readonly run: string;
  readonly index: number;
  generation: number;
  workerId: string;
  instanceId: string;
  proc: ChildProcess | null;
  /** Why the slot has no process now, or `running`. */
  status: 'running' | 'killed' | 'done' | 'stopped';
  /** How this process is being ended by the harness, so its exit is not taken for a crash. */
  ending: 'killed' | 'stopped' | null;
  /** The last summary line the worker printed. */
  summary: Record<string, unknown> | null;
  logFile: string;
}

export class WorkerFleet {
  readonly slots = new Map<string, Slot>();
  /** Every worker id that ran, and every instance whose worker has left (for late notices). */
  readonly workerIds = new Set<string>();
  readonly departedInstances: string[] = [];
  private stopping = false;
  private readonly exits = new Set<Promise<void>>();

  constructor(private readonly o: FleetOptions) {}

  static instanceId(salt: string, key: string, generation: number): string {
    return `i-${createHash('sha256').update(`${salt}:${key}:${generation}`).digest('hex').slice(0, 17)}`;
  }

  add(run: string, index: number): Slot {
    const key = `${run}/w${index}`;
    const slot: Slot = {
      key,
      run,
      index,
      generation: 0,
      workerId: `${run}-w${index}`,
      instanceId: WorkerFleet.instanceId(this.o.salt, key, 0),
      proc: null,
      status: 'stopped',
      ending: null,
      summary: null,
      logFile: '',
    };
    this.slots.set(key, slot);
    this.start(slot);
    return slot;
  }

  live(): Slot[] {
    return [...this.slots.values()].filter((s) => s.status === 'running' && s.proc);
  }

  start(slot: Slot): void {
    if (this.stopping) return;
    this.workerIds.add(slot.workerId);
    slot.logFile = join(this.o.logDir, `worker.${slot.workerId}.g${slot.generation}.${Date.now()}.log`);
    const out = openSync(slot.logFile, 'a');
    const args = [
      '--import',
      'tsx',
      ...this.o.imports.flatMap((i) => ['--import', i]),
      CLI,
      'worker',
      '--run',
      slot.run,
      '--store',
      'dynamodb',
      '--table',
      this.o.table,
      '--queue',
      this.o.queueUrl,
      '--coordinator',
      'lambda:coordinator',
      '--worker-id',
      slot.workerId,
      '--instance-id',
      slot.instanceId,
      '--provider',
      'local',
      '--heartbeat-ms',
      String(this.o.heartbeatMs),
      '--visibility-seconds',
      String(this.o.visibilitySeconds),
      '--wait-seconds',
      '1',
      // Few messages held at once: each is heartbeated and extended while held.
      '--batch',
      '2',
      '--backend',
      'http',
      '--backend-url',
      this.o.backendUrl,
      '--exit-when-done',
      '--json',
    ];
    const proc = spawn(process.execPath, args, {
      cwd: root,
      env: { ...process.env, ...this.o.env, AWS_SDK_UA_APP_ID: `w.${slot.workerId}`, CHAOS_PROCESS: slot.workerId },
      stdio: ['ignore', out, out],
    });
    closeSync(out);
    slot.proc = proc;
    slot.status = 'running';
    slot.ending = null;
    // The span is named by the worker id, as the ledger names the item's holder: a restart under the same id is a new span of it.
    const name = slot.workerId;
    this.o.onProcess(name, 'start');
    const exited = new Promise<void>((done) =>
      proc.once('exit', (code, signal) => {
        const ending = slot.ending;
        slot.proc = null;
        slot.summary = lastJson(slot.logFile);
        const reason = slot.summary && typeof slot.summary.exit === 'string' ? slot.summary.exit : null;
        this.o.onProcess(name, 'end', ending ?? (code === 0 ? 'exited' : 'crashed'));
        if (ending === 'killed') slot.status = 'killed';
        else if (ending === 'stopped' || this.stopping) slot.status = 'stopped';
        else if (code === 0 && reason === 'done') slot.status = 'done';
        else if (code === 0 && reason === 'drained') {
          // The instance is being reclaimed: the fleet brings up a new worker on a new instance.
          this.departedInstances.push(slot.instanceId);
          this.o.log(`worker ${slot.workerId} drained; replacing it`);
          slot.generation++;
          slot.workerId = `${slot.run}-w${slot.index}-g${slot.generation}`;
          slot.instanceId = WorkerFleet.instanceId(this.o.salt, slot.key, slot.generation);
          this.later(300, () => this.start(slot));
        } else {
          this.o.log(`worker ${slot.workerId} exited (code ${code}, signal ${signal}); restarting it — see ${slot.logFile}`);
          this.later(500, () => this.start(slot));
        }
        done();
      }),
    );
    this.exits.add(exited);
    void exited.finally(() => this.exits.delete(exited));
  }

  /** Resolves when the slot's current worker process has exited (at once if it has none). */
  gone(slot: Slot): Promise<void> {
    const proc = slot.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
    return new Promise((r) => proc.once('exit', () => r()));
  }

  /** SIGKILL the slot's worker; it stays down until `restart`. Resolves once the process is gone. */
  async kill(slot: Slot): Promise<boolean> {
    const proc = slot.proc;
    if (!proc || slot.status !== 'running') return false;
    slot.ending = 'killed';
    const gone = new Promise<void>((r) => proc.once('exit', () => r()));
    proc.kill('SIGKILL');
    await gone;
    return true;
  }

  /**
   * A killed worker's process comes back on the same instance as a new worker
   * (the command's default id is host-pid: a new process is a new worker); what
   * the dead one held is recovered by the failure scan, not adopted.
   */
  restart(slot: Slot): void {
    if (slot.status !== 'killed') return;
    slot.generation++;
    slot.workerId = `${slot.run}-w${slot.index}-g${slot.generation}`;
    this.start(slot);
  }

  /** Every slot done (its worker saw the run finished) or stopped. */
  allDone(): boolean {
    return [...this.slots.values()].every((s) => s.status === 'done');
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearTimeout(t);
    for (const slot of this.slots.values()) {
      if (!slot.proc) continue;
      slot.ending = 'stopped';
      slot.proc.kill('SIGKILL');
    }
    while (this.exits.size) await Promise.all([...this.exits]);
  }

  private readonly timers = new Set<NodeJS.Timeout>();

  private later(ms: number, f: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      f();
    }, ms);
    this.timers.add(t);
  }
}

/** The worker prints its summary as the last JSON line of its output. */
function lastJson(file: string): Record<string, unknown> | null {
  const lines = readFileSync(file, 'utf8').trim().split('\n').reverse();
  for (const line of lines) {
    if (!line.startsWith('{')) continue;
    try {
      const v = JSON.parse(line) as Record<string, unknown>;
      if ('exit' in v && 'workerId' in v) return v;
    } catch {
      // a log line, not the summary
    }
  }
  return null;
}
