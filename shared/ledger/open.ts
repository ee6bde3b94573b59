import { LeaseElector } from '../lease/elector.js';
import type { LeaseTimingsInput } from '../lease/config.js';
import type { LeaseStore } from '../lease/store.js';
import { Coordinator, type CoordinatorOptions } from './coordinator.js';
import { coordinatorLease } from './store.js';

export type OpenedCoordinator =
  | { readonly coordinator: Coordinator; readonly elector: LeaseElector; readonly epoch: number }
  | { readonly coordinator: null; readonly holder: string | null };

/**
 * Win (or adopt) `coordinator:<run>` as `holderId` and return the run's
 * Coordinator under that lease, or who holds it instead. The one opening
 * every runtime uses: a coordinator Lambda sandbox opens it when cold and
 * keeps it while the lease is fresh (`readFirst`: a lease its stack already
 * holds is adopted without a write); a node keeps the lease renewed
 * (`elector.start()`) and replays the ledger. A silent worker is judged after
 * one lease TTL (the failure timeout).
 */
export async function openRunCoordinator(
  o: Omit<CoordinatorOptions, 'elector' | 'failureTimeoutMs'> & {
    readonly leases: LeaseStore;
    readonly holderId: string;
    readonly timings: LeaseTimingsInput & { readonly ttlMs: number };
    readonly readFirst?: boolean;
  },
): Promise<OpenedCoordinator> {
  const { leases, holderId, timings, readFirst, ...options } = o;
  const elector = new LeaseElector(leases, {
    name: coordinatorLease(o.runId),
    holderId,
    ...timings,
    ...(readFirst ? { readFirst } : {}),
    ...(o.logger ? { logger: o.logger } : {}),
  });
  const won = await elector.campaign();
  if (!won.leader) return { coordinator: null, holder: won.record?.holder ?? null };
  const coordinator = new Coordinator({ ...options, elector, failureTimeoutMs: timings.ttlMs });
  return { coordinator, elector, epoch: elector.token()!.epoch };
}
