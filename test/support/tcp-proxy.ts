import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of a real server, to make the network lie:
 * - `dropNextReply()`: the next bytes the server sends on any connection are
 *   swallowed and that connection is cut — the request was delivered and
 *   committed, the reply was lost;
 * - `blackhole(true)`: stop forwarding in both directions without closing —
 *   a silent partition;
 * - `refuse(true)`: the server is down (connections cut and refused);
 * - `delay(ms)`: every byte, both ways, arrives `ms` late and in order — a
 *   congested link; bytes already sent are delivered even if their sender has
 *   since died (the network does not know);
 * - `hold(true)`: bytes stop moving but are kept; `hold(false)` delivers them
 *   all, late and in order (a paused or partitioned sender's writes arriving
 *   after the world moved on);
 * - `loseReplies(true)`: every reply cuts its connection instead of arriving;
 * - `slowAt(markers, ms, windowMs)`: a request carrying the markers, and what
 *   follows it on its own connection, arrives `ms` late while the link's other
 *   connections move on (a write overtaken by later ones); so does every
 *   other such request within `windowMs` of the first.
 */
export class FaultyProxy {
  private server: Server | undefined;
  private readonly pairs = new Set<{ client: Socket; upstream: Socket }>();
  private dropArmed = false;
  private holes = false;
  private refusing = false;
  private delayMs = 0;
  private losing = false;
  private holding = false;
  private held: (() => void)[] = [];
  private holdMarker: readonly string[] | null = null;
  private onHeld: (() => void) | undefined;
  private slow: {
    readonly markers: readonly string[];
    readonly ms: number;
    readonly windowMs: number;
    readonly caught: () => void;
    until: number | null;
  } | null = null;
  dropped = 0;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(): Promise<this> {
    this.server = createServer((client) => {
      if (this.refusing) {
        client.destroy();
        return;
      }
      const upstream = connect(this.targetPort, this.targetHost);
      const pair = { client, upstream };
      this.pairs.add(pair);
      // Deliveries in flight, per direction: a close waits for them (bytes on the wire still arrive).
      let inFlight = Promise.resolve();
      let queued = 0;
      const close = () => {
        void inFlight.then(() => {
          this.pairs.delete(pair);
          client.destroy();
          upstream.destroy();
        });
      };
      const later = (write: () => void) => {
        // Held bytes wait in order for release(), like packets queued in a congested network.
        const deliver = () => (this.holding ? this.held.push(write) : write());
        // Without a delay, and nothing delayed still on its way: at once. Otherwise in order behind it.
        if (this.delayMs <= 0 && queued === 0) return deliver();
        const dueAt = Date.now() + this.delayMs;
        queued++;
        inFlight = inFlight.then(
          () =>
            new Promise<void>((r) =>
              setTimeout(
                () => {
                  queued--;
                  deliver();
                  r();
                },
                Math.max(0, dueAt - Date.now()),
              ),
            ),
        );
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
      // This connection's requests while one of them is slowed (slowAt): they wait behind it, in order.
      let slowed: (() => void)[] | null = null;
      client.on('data', (b: Buffer) => {
        if (this.slow && this.slow.until !== null && Date.now() > this.slow.until) this.slow = null;
        if (!slowed && this.slow && this.slow.markers.every((m) => b.includes(m))) {
          const { ms, caught } = this.slow;
          this.slow.until ??= Date.now() + this.slow.windowMs;
          slowed = [];
          setTimeout(() => {
            const queue = slowed ?? [];
            slowed = null;
            for (const w of queue) w();
          }, ms);
          caught();
        }
        if (slowed) {
          if (!this.holes) slowed.push(() => later(() => upstream.destroyed || upstream.write(b)));
          return;
        }
        if (this.holdMarker && this.holdMarker.every((m) => b.includes(m))) {
          this.holding = true;
          this.holdMarker = null;
          this.onHeld?.();
        }
        if (!this.holes) later(() => upstream.destroyed || upstream.write(b));
      });
      upstream.on('data', (b: Buffer) => {
        if (this.holes) return;
        if (this.dropArmed || this.losing) {
          this.dropArmed = false;
          this.dropped++;
          this.pairs.delete(pair);
          client.destroy();
          upstream.destroy();
          return;
        }
        later(() => client.destroyed || client.write(b));
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    const addr = this.server.address();
    this.port = addr && typeof addr === 'object' ? addr.port : 0;
    return this;
  }

  dropNextReply(): void {
    this.dropArmed = true;
  }

  /** The server is down: every connection is cut, new ones are closed at once. */
  refuse(on: boolean): void {
    this.refusing = on;
    if (!on) return;
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream.destroy();
    }
    this.pairs.clear();
  }

  /** Every byte from now on arrives `ms` late (0: on time again). */
  delay(ms: number): void {
    this.delayMs = ms;
  }

  /** Bytes stop moving but are kept (both ways), and all arrive, in order, when it is switched off. */
  hold(on: boolean): void {
    this.holding = on;
    if (on) return;
    // Released: nothing stays armed either.
    this.holdMarker = null;
    this.slow = null;
    const queued = this.held;
    this.held = [];
    for (const w of queued) w();
  }

  /**
   * Starts holding (as `hold(true)`) at the first request whose bytes contain
   * `marker` (every one of them, if several) — that request included — and
   * resolves then: a write caught in the network on its way to the server.
   */
  holdAt(marker: string | readonly string[]): Promise<void> {
    return new Promise((resolve) => {
      this.holdMarker = typeof marker === 'string' ? [marker] : marker;
      this.onHeld = () => {
        this.onHeld = undefined;
        resolve();
      };
    });
  }

  /** Requests whose bytes contain every marker, from the first one for `windowMs`, arrive `ms` late, each with what follows it on its connection; resolves at the first. */
  slowAt(markers: readonly string[], ms: number, windowMs = 0): Promise<void> {
    return new Promise((resolve) => (this.slow = { markers, ms, windowMs, caught: resolve, until: null }));
  }

  loseReplies(on: boolean): void {
    this.losing = on;
  }

  blackhole(on: boolean): void {
    this.holes = on;
  }

  async stop(): Promise<void> {
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream.destroy();
    }
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
