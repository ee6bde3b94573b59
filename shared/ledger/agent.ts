import { systemClock, type Clock } from '../clock.js';
import type { ComputeHint, PreemptionNotice } from '../drain/compute-hint.js';
import { drain, type DrainReport } from '../drain/drain.js';
import { RegistryHint } from '../registry/hint.js';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import type { AgentRegistry, Registration } from '../registry/registry.js';
import type { LedgerStore } from './store.js';
import type { Worker } from './worker/index.js';

/**
 * A worker as a long-running process: registers itself, heartbeats the
 * registry (which is how a drain requested by the spot-drain Lambda reaches
 * it), listens to any other preemption source, runs the pull loop, and on a
 * notice drains within the provider's deadline and stops. `run` resolves with
 * why it stopped.
 */
export interface AgentOptions {
  worker: Worker;
  registry: AgentRegistry;
  registration: Registration;
  ledger: Pick<LedgerStore, 'isDone'>;
  /** Extra preemption sources (instance metadata); the registry's drain requests are always watched. */
  hints?: readonly ComputeHint[];
  registryHeartbeatMs?: number;
  /** Stop once the run has nothing Pending or Running. */
  exitWhenDone?: boolean;
  clock?: Clock;
  logger?: Logger;
}

export type AgentExit = { readonly reason: 'done' | 'stopped' } | { readonly reason: 'drained'; readonly report: DrainReport };

export class WorkerAgent {
  private readonly registryHint = new RegistryHint();
  private readonly clock: Clock;
  private readonly logger: Logger;

  constructor(private readonly o: AgentOptions) {
    this.clock = o.clock ?? systemClock;
    this.logger = o.logger ?? silentLogger;
  }

  async run(signal: AbortSignal): Promise<AgentExit> {
    const { worker, registry, registration: reg } = this.o;
    const stop = new AbortController();
    const stopAll = AbortSignal.any([signal, stop.signal]);
    const state: { draining: Promise<DrainReport> | null } = { draining: null };
    const onNotice = (notice: PreemptionNotice) => {
      if (state.draining) return;
      this.logger.warn('preemption notice: draining', { ...notice });
      state.draining = drain({ stopAndNack: () => worker.drain(), deregister: () => registry.deregister(reg, this.clock.now()) }, notice, {
        clock: this.clock,
      });
      stop.abort();
    };
    // Listening before registering: a drain requested while this worker was away is in the record registration returns.
    const unsubscribe = [this.registryHint, ...(this.o.hints ?? [])].map((h) => h.onPreemption(onNotice));
    let beat: NodeJS.Timeout | undefined;
    try {
      const record = await registry.register(reg, this.clock.now());
      this.logger.info('worker registered', { ...reg, state: record.state, known: record.known });
      if (record.known === false) worker.firstLife();
      this.registryHint.observe(record);
      beat = setInterval(() => {
        registry
          .heartbeat(reg, this.clock.now())
          .then((r) => this.registryHint.observe(r))
          .catch((err: unknown) => this.logger.warn('registry heartbeat failed', { error: errorMessage(err) }));
      }, this.o.registryHeartbeatMs ?? 5_000);
      let done = false;
      // Only a worker that exits when its run is done checks on idle: the others long-poll undisturbed.
      await worker.run(
        stopAll,
        this.o.exitWhenDone
          ? async () => {
              done = await this.o.ledger.isDone(reg.runId);
              return done;
            }
          : undefined,
      );
      if (state.draining) {
        const report = await state.draining;
        this.logger.info('drained', { ...report });
        return { reason: 'drained', report };
      }
      await registry.deregister(reg, this.clock.now());
      return { reason: done ? 'done' : 'stopped' };
    } finally {
      clearInterval(beat);
      for (const u of unsubscribe) u();
    }
  }
}
