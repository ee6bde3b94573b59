import zlib from 'node:zlib';
import workerThreads from 'node:worker_threads';

/**
 * linkinator 8 (and the undici 8 it fetches with) is written for Node.js 22:
 * on the Node.js 20 the suites run on, three things it touches are missing.
 * Stand-ins for exactly those, set only where absent: zstd decompression
 * (our static server sends none), marking an object uncloneable (no object
 * crosses threads here) and Promise.withResolvers (the standard shape).
 */
function shimForNode20(): void {
  const z = zlib as unknown as Record<string, unknown>;
  z.createZstdDecompress ??= () => {
    throw new Error('zstd decompression needs Node.js 22');
  };
  const w = workerThreads as unknown as Record<string, unknown>;
  w.markAsUncloneable ??= () => undefined;
  const P = Promise as unknown as { withResolvers?: () => unknown };
  P.withResolvers ??= () => {
    let resolve: unknown;
    let reject: unknown;
    const promise = new Promise((a, b) => {
      resolve = a;
      reject = b;
    });
    return { promise, resolve, reject };
  };
}

export interface BrokenLink {
  readonly url: string;
  readonly status: number | undefined;
  readonly parent: string | undefined;
}

/** Every link and `#fragment` reachable from `url` on its own origin, checked; what is broken. Links off the origin are not followed. */
export async function brokenLinks(url: string, skip: readonly RegExp[] = []): Promise<{ checked: number; broken: BrokenLink[] }> {
  shimForNode20();
  const { LinkChecker, LinkState } = await import('linkinator');
  const origin = new URL(url).origin;
  const result = await new LinkChecker().check({
    path: url,
    recurse: true,
    checkFragments: true,
    concurrency: 4,
    timeout: 60_000,
    linksToSkip: (link: string) => Promise.resolve(!link.startsWith(origin) || skip.some((re) => re.test(link))),
  });
  const broken = result.links.filter((l) => l.state === LinkState.BROKEN).map((l) => ({ url: l.url, status: l.status, parent: l.parent }));
  return { checked: result.links.filter((l) => l.state === LinkState.OK).length, broken };
}
