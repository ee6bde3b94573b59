/** A promise the test opens when it wants the other side to proceed. */
export interface Gate {
  readonly wait: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/** Resolves once `cond` holds; polls a real condition (a server's state), never a fixed sleep. */
export async function until(what: string, cond: () => Promise<boolean> | boolean, timeoutMs = 10_000, everyMs = 5): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Whether a promise has settled by now, without waiting for it to. (A race
 * against an already-resolved marker cannot tell: the marker always wins,
 * because `p.then(…)` settles one microtask later even when `p` has.)
 */
export async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  // Every callback of an already-settled promise runs before the next macrotask.
  await new Promise((r) => setImmediate(r));
  return done;
}

/** The first truthy value `probe` returns, polled every 25 ms; throws naming `what` after `ms`. */
export async function eventually<T>(what: string, ms: number, probe: () => T | null | undefined | false | Promise<T | null | undefined | false>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
