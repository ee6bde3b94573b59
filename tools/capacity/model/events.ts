/** The model's clock: a seeded random source and the event queue every simulated process waits on. */

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A binary heap of (time, sequence) → callback: ties run in the order they were scheduled. */
export class Events {
  private t: number[] = [];
  private s: number[] = [];
  private f: (() => void)[] = [];
  private seq = 0;

  get size(): number {
    return this.t.length;
  }

  push(time: number, fn: () => void): void {
    const t = this.t;
    const s = this.s;
    const f = this.f;
    let i = t.length;
    const seq = this.seq++;
    t.push(time);
    s.push(seq);
    f.push(fn);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (t[p]! < time || (t[p] === time && s[p]! < seq)) break;
      t[i] = t[p]!;
      s[i] = s[p]!;
      f[i] = f[p]!;
      i = p;
    }
    t[i] = time;
    s[i] = seq;
    f[i] = fn;
  }

  /** The earliest event's time and callback. */
  pop(): [number, () => void] {
    const t = this.t;
    const s = this.s;
    const f = this.f;
    const top: [number, () => void] = [t[0]!, f[0]!];
    const lt = t.pop()!;
    const ls = s.pop()!;
    const lf = f.pop()!;
    const n = t.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        let c = l;
        if (r < n && (t[r]! < t[l]! || (t[r] === t[l] && s[r]! < s[l]!))) c = r;
        if (lt < t[c]! || (lt === t[c] && ls < s[c]!)) break;
        t[i] = t[c]!;
        s[i] = s[c]!;
        f[i] = f[c]!;
        i = c;
      }
      t[i] = lt;
      s[i] = ls;
      f[i] = lf;
    }
    return top;
  }
}
