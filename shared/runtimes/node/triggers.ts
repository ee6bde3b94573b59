import type { ApiRequest, ApiResponse } from '../../api/handler.js';
import { matches } from '../../events/pattern.js';
import { errorMessage, silentLogger, type Logger } from '../../log.js';
import { FUNCTIONS, type FunctionName, type Trigger } from '../../topology.js';

/**
 * The local runtime's side of the topology: every function of
 * `shared/topology.ts` wired from its declared triggers, as the CDK stack
 * wires the same declaration in AWS.
 *
 *   rule      a route of the in-process bus: an event goes to every function
 *             whose rule (on that bus) matches it, with EventBridge's own
 *             pattern semantics (shared/events/pattern.ts)
 *   schedule  a timer at the local cadence: AWS schedules fire at most once a
 *             minute, a node ticks as often as it is configured to
 *   invoke    a call with the request as the Lambda would receive it
 *   http      the node's HTTP server
 *
 * The handler map is typed from the topology, so a function or a trigger
 * added there does not compile here until the local runtime serves it.
 */

/** An event as EventBridge delivers it to a target. */
export interface BusEnvelope {
  readonly source: string;
  readonly 'detail-type': string;
  readonly detail: unknown;
  readonly time?: string;
  readonly id?: string;
}

/** A loop of the local runtime: run now, then every `everySeconds` from the start of the previous run, never two at once. */
export interface LocalSchedule {
  readonly everySeconds: number;
  readonly run: () => Promise<unknown>;
}

export interface LocalHandlerKinds {
  rule: (event: BusEnvelope) => Promise<unknown>;
  schedule: LocalSchedule;
  invoke: (request: unknown) => Promise<unknown>;
  http: (req: ApiRequest) => Promise<ApiResponse>;
}

type KindsOf<F extends FunctionName> = (typeof FUNCTIONS)[F]['triggers'][number]['kind'];

/** One handler per function and kind of trigger it declares: exactly what the topology names. */
export type LocalHandlers = { readonly [F in FunctionName]: { readonly [K in KindsOf<F>]: LocalHandlerKinds[K] } };

export class NoRouteError extends Error {
  override readonly name = 'NoRouteError';
}

export class LocalTriggers {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly running = new Set<Promise<unknown>>();
  private started = false;
  private stopped = false;

  constructor(
    private readonly handlers: LocalHandlers,
    private readonly logger: Logger = silentLogger,
  ) {}

  /** What is wired, one line per function and trigger: `streamingPromoter ← rule on rollout`, … */
  get wiring(): readonly { readonly fn: FunctionName; readonly trigger: Trigger['kind']; readonly how: string }[] {
    return this.each().map(({ fn, trigger }) => ({ fn, trigger: trigger.kind, how: this.describe(fn, trigger) }));
  }

  /** Starts the timers of every schedule trigger. */
  start(): void {
    if (this.started) return;
    this.started = true;
    for (const { fn, trigger } of this.each()) {
      if (trigger.kind === 'schedule') this.loop(`${fn}/${trigger.kind}`, this.handler(fn, trigger.kind) as LocalSchedule);
    }
  }

  /** Stops the timers and waits for the runs under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled([...this.running]);
  }

  /**
   * Puts an event on a bus: every function with a rule on that bus whose
   * pattern matches gets it (as EventBridge delivers to every matching rule).
   * No match is a NoRouteError naming the event.
   */
  async route(bus: 'rollout' | 'default', event: BusEnvelope): Promise<{ fn: FunctionName; result: unknown }[]> {
    const targets = this.each().filter(({ trigger }) => trigger.kind === 'rule' && trigger.bus === bus && matches(trigger.pattern, event));
    if (!targets.length) throw new NoRouteError(`no function takes ${event.source} "${event['detail-type']}" on the ${bus} bus`);
    const out: { fn: FunctionName; result: unknown }[] = [];
    for (const { fn } of targets) out.push({ fn, result: await (this.handler(fn, 'rule') as LocalHandlerKinds['rule'])(event) });
    return out;
  }

  /** A direct invocation of a function that declares one. */
  invoke(fn: FunctionName, request: unknown): Promise<unknown> {
    return (this.handler(fn, 'invoke') as LocalHandlerKinds['invoke'])(request);
  }

  /** The HTTP handler of a function that declares one. */
  http(fn: FunctionName): LocalHandlerKinds['http'] {
    return this.handler(fn, 'http') as LocalHandlerKinds['http'];
  }

  private each(): { fn: FunctionName; trigger: Trigger }[] {
    return (Object.keys(FUNCTIONS) as FunctionName[]).flatMap((fn) => (FUNCTIONS[fn].triggers as readonly Trigger[]).map((trigger) => ({ fn, trigger })));
  }

  private handler(fn: FunctionName, kind: Trigger['kind']): unknown {
    const h = (this.handlers[fn] as Partial<Record<Trigger['kind'], unknown>>)[kind];
    if (h === undefined) throw new NoRouteError(`${fn} has no ${kind} trigger in the topology`);
    return h;
  }

  private describe(fn: FunctionName, t: Trigger): string {
    switch (t.kind) {
      case 'rule':
        return `in-process ${t.bus} bus, pattern ${JSON.stringify(t.pattern)}`;
      case 'schedule':
        return `timer every ${(this.handler(fn, t.kind) as LocalSchedule).everySeconds} s`;
      case 'invoke':
        return 'direct call';
      case 'http':
        return "the node's HTTP server";
    }
  }

  private loop(name: string, s: LocalSchedule): void {
    const once = () => {
      if (this.stopped) return;
      const startedAt = Date.now();
      const run = s
        .run()
        .catch((err: unknown) => this.logger.warn('background step failed', { step: name, error: errorMessage(err) }))
        .finally(() => {
          this.running.delete(run);
          if (!this.stopped) this.timers.set(name, setTimeout(once, Math.max(0, s.everySeconds * 1000 - (Date.now() - startedAt))));
        });
      this.running.add(run);
    };
    once();
  }
}
