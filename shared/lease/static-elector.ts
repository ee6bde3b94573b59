import { casSettled } from './cas.js';
import { PROMOTION_LEASE } from './names.js';
import type { ElectorCallbacks, LeaderElector, Stopped } from './elector.js';
import type { LeaseRecord, LeaseToken } from './record.js';
import type { LeaseStore } from './store.js';
import { acquire, release, renew, steal, stealable } from './transitions.js';

/**
 * Single-node elector, the default until HA is enabled: always
 * leads with a fixed epoch and touches no database. Fenced writes check the
 * lease row, so a node that writes through the store uses `pinStaticLeader`,
 * which backs the epoch with the row once at start. Running two nodes with it
 * against one store gives two leaders; use LeaseElector for more than one.
 */
export class StaticElector implements LeaderElector {
  private stopped = false;
  private started = false;

  constructor(
    readonly holderId: string,
    readonly name = PROMOTION_LEASE,
    readonly epoch = 0,
    private readonly callbacks: Pick<ElectorCallbacks, 'onStartedLeading'> = {},
  ) {
    if (!holderId.trim()) throw new Error('StaticElector: holderId must not be empty');
  }

  get state(): 'leader' | 'stopped' {
    return this.stopped ? 'stopped' : 'leader';
  }

  token(): LeaseToken | null {
    return this.stopped ? null : { name: this.name, holder: this.holderId, epoch: this.epoch };
  }

  isLeader(): Promise<boolean> {
    return Promise.resolve(!this.stopped);
  }

  /** Leads from the start: tells `onStartedLeading` once, as a lease elector does on winning. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.callbacks.onStartedLeading?.(this.token()!);
  }

  /** Always leads: nothing to try. */
  tryNow(): void {}

  /** Its row is written once, at start: nothing is renewed. */
  renewalCounts(): { readonly renewals: number; readonly renewFailures: number } {
    return { renewals: 0, renewFailures: 0 };
  }

  /** Its row stays held (a restart of the same holder takes it back): nothing is released. */
  stop(): Promise<Stopped> {
    this.stopped = true;
    return Promise.resolve({ released: false });
  }
}

/** Long enough to mean "until resigned"; a restart of the same holder takes its row back. */
const PINNED_TTL_MS = 100 * 365 * 24 * 3_600_000;

/**
 * A StaticElector whose epoch is backed by the lease row, so the store's
 * fenced writes accept its token. It writes the row once, at start: absent →
 * acquire, ours (a restart) → renew, released or expired → steal (epoch + 1).
 * A row another holder still holds is refused: two static nodes on one store
 * would be two leaders. `stop()` releases the row (epoch kept).
 */
export async function pinStaticLeader(
  store: LeaseStore,
  holderId: string,
  options: { name?: string; hostname?: string | null; apiUrl?: string | null; now?: () => number } & Pick<ElectorCallbacks, 'onStartedLeading'> = {},
): Promise<StaticElector & { release(): Promise<void> }> {
  const name = options.name ?? PROMOTION_LEASE;
  const now = options.now ?? Date.now;
  const meta = { hostname: options.hostname ?? null, apiUrl: options.apiUrl ?? null };
  const row = await store.read(name);
  let next: LeaseRecord;
  if (row === null) next = acquire(name, holderId, now(), PINNED_TTL_MS, meta);
  else if (row.holder === holderId) next = renew(row, now(), PINNED_TTL_MS);
  else if (stealable(row, now(), 0)) next = steal(row, holderId, now(), PINNED_TTL_MS, meta);
  else
    throw new Error(
      `lease ${name} is held by ${row.holder} until ${new Date(row.expiresAt).toISOString()}: a static node must be the only node on its store (use the lease elector for several)`,
    );
  const outcome = await casSettled(store, row, next);
  if (!outcome.ok) throw new Error(`lease ${name} changed while a static node was taking it (now held by ${outcome.current?.holder ?? 'nobody'}); try again`);
  let held: LeaseRecord | null = outcome.record;
  const elector = new StaticElector(holderId, name, held.epoch, options.onStartedLeading ? { onStartedLeading: options.onStartedLeading } : {});
  const stop = elector.stop.bind(elector);
  const releaseRow = async (): Promise<boolean> => {
    if (!held) return false;
    const r = held;
    held = null;
    return (await casSettled(store, r, release(r, now()))).ok;
  };
  const pinned: StaticElector & { release(): Promise<void> } = Object.assign(elector, {
    release: async () => void (await releaseRow()),
    stop: async (o: { resign?: boolean } = {}): Promise<Stopped> => {
      await stop();
      return { released: o.resign !== false && (await releaseRow()) };
    },
  });
  return pinned;
}
