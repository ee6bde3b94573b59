/**
 * What a step returns: the delay to the next step once it got an answer, or
 * `{ unanswered }` (the usual delay) when it failed before it got one.
 */
export type StepOutcome = number | { readonly unanswered: number };

/**
 * An elector's loop: one step at a time, each followed by the delay it
 * returns. `now()` runs a step at once instead of waiting for the timer (a
 * wake-up: a leader announced it resigned); from then until a step gets an
 * answer, failed steps retry with WakeBackoff rather than after the usual
 * delay. `after()` moves the next step; `stop()` waits for the step in
 * flight, and none starts after it. Steps never overlap. A step handles its
 * own errors: what it throws ends the loop.
 */
export class StepLoop {
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> = Promise.resolve();
  private busy = false;
  /** `now()` was called during a step: the next follows at once. */
  private again = false;
  private readonly wake = new WakeBackoff();

  constructor(private readonly step: () => Promise<StepOutcome>) {}

  /** Started and not stopped. */
  get active(): boolean {
    return this.running;
  }

  /** A step is running now. */
  get stepping(): boolean {
    return this.busy;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.after(0);
  }

  /** The next step in `delayMs`, whatever the last one asked for (a step in flight sets its own when it ends). */
  after(delayMs: number): void {
    if (!this.running) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (!this.busy) this.inFlight = this.run();
    }, delayMs);
  }

  /** A step now; if one is running, another right after it. */
  now(): void {
    if (!this.running) return;
    this.wake.woken();
    if (this.busy) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.inFlight = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.inFlight;
  }

  private async run(): Promise<void> {
    this.busy = true;
    this.again = false;
    this.wake.stepBegins();
    let next: number;
    try {
      const outcome = await this.step();
      if (typeof outcome === 'number') {
        this.wake.answered();
        next = outcome;
      } else next = this.wake.afterFailure(outcome.unanswered);
    } finally {
      this.busy = false;
    }
    this.after(this.again ? 0 : next);
  }
}

/** After a wake-up, a failed step is retried this soon, doubling up to the loop's usual wait. */
export const WAKE_RETRY_MS = 100;

/**
 * A wake-up says the lease is free now; one failed attempt must not lose that
 * news until the next retry. From the wake-up until a step gets an answer,
 * failed steps retry from WAKE_RETRY_MS with backoff.
 */
export class WakeBackoff {
  private failures: number | null = null;
  /** Woken while the current step ran: its answer predates the news. */
  private sinceStepBegan = false;

  woken(): void {
    this.failures = 0;
    this.sinceStepBegan = true;
  }

  stepBegins(): void {
    this.sinceStepBegan = false;
  }

  answered(): void {
    if (!this.sinceStepBegan) this.failures = null;
  }

  /** The wait after a failed step: `usual` unless a wake-up is pending. */
  afterFailure(usual: number): number {
    if (this.failures === null) return usual;
    return Math.min(WAKE_RETRY_MS * 2 ** this.failures++, usual);
  }
}
