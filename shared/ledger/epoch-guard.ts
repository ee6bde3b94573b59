/**
 * A worker's EpochGuard: remembers the highest coordinator epoch it has seen
 * and rejects any instruction that carries a lower one, so a deposed
 * coordinator's late replies can never steer it.
 */
export class EpochGuard {
  private highest = -1;

  /** True (and remembered) when `epoch` is at least the highest seen; false for a stale instruction. */
  accept(epoch: number): boolean {
    if (!Number.isSafeInteger(epoch) || epoch < 0) throw new RangeError(`EpochGuard: invalid epoch ${epoch}`);
    if (epoch < this.highest) return false;
    this.highest = epoch;
    return true;
  }

  get current(): number {
    return this.highest;
  }
}
