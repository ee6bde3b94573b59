import type { Actuator } from '../../../shared/actuation/port.js';

/**
 * One actuator over a real target, for the actuator contract suite
 * (test/contract/actuator.contract.test.ts): every kind passes the same cases.
 */
export interface ActuatorFixture {
  readonly kind: string;
  /** A fresh target at rest (all traffic on stable, never written by us) and an actuator for it. */
  setup(): Promise<ActuatorUnderTest>;
}

export interface ActuatorUnderTest {
  readonly actuator: Actuator;
  /** A version the target can be moved to (for a Lambda alias, a published version other than the alias's). */
  readonly newVersion: string;
  /** The share of real traffic the target sends to the new version, measured where it can be (nginx), else as its configuration states. */
  measuredPercent?(): Promise<number>;
  /** An outside writer (a person, a GitOps tool) sets the new version's share to `percent`, leaving any stamp as it is. */
  tamper(percent: number): Promise<void>;
  close(): Promise<void>;
}
