/**
 * The control plane's lease: its holder is the leader, which alone promotes
 * rollouts and runs the scheduled maintenance, and its epoch fences every
 * rollout write. Every elector contends for it unless told another name; the
 * API reads it to say who leads. (A run's coordinator lease, `coordinator:<run>`,
 * is the ledger's: shared/ledger/store.ts.)
 */
export const PROMOTION_LEASE = 'promotion_leader';
