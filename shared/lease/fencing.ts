import type { LeaseToken } from './record.js';

export interface LeaseHolderView {
  readonly holder: string | null;
  readonly epoch: number;
}

/**
 * A write made under `token` was rejected by the store because the lease row
 * no longer has that holder and epoch. The caller has been deposed and must
 * stop acting at once; `current` is what the row holds now (null: no row).
 */
export class FencedError extends Error {
  override readonly name = 'FencedError';
  constructor(
    readonly token: LeaseToken,
    readonly current: LeaseHolderView | null,
  ) {
    super(
      `fenced: lease ${token.name} is ${
        current === null ? 'absent' : `held by ${current.holder ?? '(nobody)'} at epoch ${current.epoch}`
      }, not by ${token.holder} at epoch ${token.epoch}`,
    );
  }
}

export function matchesToken(view: LeaseHolderView | null | undefined, token: LeaseToken): boolean {
  return view !== null && view !== undefined && view.holder === token.holder && view.epoch === token.epoch;
}
