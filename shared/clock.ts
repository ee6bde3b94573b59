/** Milliseconds since the Unix epoch. Injected everywhere time matters so tests never sleep. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
