import type { LeaderElector } from './elector.js';
import type { LeaseToken } from './record.js';

/**
 * Single-node elector, the default until HA is enabled (seed 000): always
 * leads with a fixed epoch and touches no database. Running two nodes with it
 * against one store gives two leaders; use LeaseElector for more than one.
 */
export class StaticElector implements LeaderElector {
  private stopped = false;

  constructor(
    readonly holderId: string,
    readonly name = 'promotion_leader',
    readonly epoch = 0,
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

  start(): void {}

  stop(): Promise<void> {
    this.stopped = true;
    return Promise.resolve();
  }
}
