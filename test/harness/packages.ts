/**
 * The Debian packages a test run needs, found or installed before anything
 * starts. Installing happens here, in the harness's first process, because
 * the run itself moves into a loopback-only network namespace where the
 * package mirror cannot be reached. As root the missing packages are
 * installed (`apt-get`); otherwise the run stops with one line naming the
 * exact command to run. A suite is never skipped because a tool is missing.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';

export interface Requirement {
  /** The Debian package that provides it. */
  readonly pkg: string;
  readonly why: string;
  readonly present: () => boolean;
}

const onPath = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
const postgresInitdb = () => {
  try {
    return readdirSync('/usr/lib/postgresql').some((v) => existsSync(`/usr/lib/postgresql/${v}/bin/initdb`));
  } catch {
    return false;
  }
};

export const REQUIREMENTS = {
  java: { pkg: 'openjdk-17-jre-headless', why: 'DynamoDB Local', present: () => onPath('java') },
  postgres: { pkg: 'postgresql-15', why: 'the throwaway PostgreSQL cluster', present: postgresInitdb },
  nginx: { pkg: 'nginx', why: "the local cluster's end-to-end test and the actuation bench", present: () => existsSync('/usr/sbin/nginx') || onPath('nginx') },
  chromium: { pkg: 'chromium', why: "the status page's browser test", present: () => existsSync(process.env.CHROMIUM_PATH ?? '/usr/bin/chromium') },
  prometheus: {
    pkg: 'prometheus',
    why: 'the Prometheus gate tests and the promotion bench',
    present: () => (process.env.PROMETHEUS_BIN ? existsSync(process.env.PROMETHEUS_BIN) : existsSync('/usr/bin/prometheus') || onPath('prometheus')),
  },
  wrk: { pkg: 'wrk', why: "the API and actuation benchmarks' load", present: () => onPath('wrk') },
  openssl: { pkg: 'openssl', why: 'throwaway certificates for the TLS tests', present: () => onPath('openssl') },
  unshare: { pkg: 'util-linux', why: 'a loopback-only network namespace', present: () => onPath('unshare') },
  ip: { pkg: 'iproute2', why: 'a loopback-only network namespace', present: () => onPath('ip') },
} as const satisfies Record<string, Requirement>;
export type Need = keyof typeof REQUIREMENTS;

/** Which test files need which tools beyond the services (the e2e suites, the ones with a real Prometheus). */
const FILE_NEEDS: Record<string, readonly Need[]> = {
  'test/e2e/cluster.test.ts': ['nginx'],
  'test/e2e/cluster-auth.test.ts': ['nginx', 'chromium', 'openssl'],
  'test/security/tls.test.ts': ['openssl'],
  'test/e2e/status-page.test.ts': ['chromium', 'nginx'],
  'test/e2e/chaos.test.ts': ['nginx'],
  'test/e2e/actuation.test.ts': ['nginx'],
  'test/contract/actuator.contract.test.ts': ['nginx'],
  'test/contract/actuation.contract.test.ts': ['nginx'],
  'test/integration/nginx-actuator.test.ts': ['nginx'],
  'test/e2e/chaos-timeline.test.ts': ['chromium'],
  'test/e2e/docs-site.test.ts': ['chromium'],
  'test/integration/prometheus-support.test.ts': ['prometheus'],
  'test/integration/prometheus-gates.test.ts': ['prometheus'],
  'test/integration/operate.test.ts': ['prometheus'],
  'test/integration/prometheus-provider.test.ts': ['prometheus'],
  'test/contract/gate-providers.contract.test.ts': ['prometheus'],
};

/** Which benchmarks (`bench NAME`, test/bench/NAME.ts) need which tools beyond the services. */
const BENCH_NEEDS: Record<string, readonly Need[]> = {
  promotion: ['prometheus'],
  api: ['wrk'],
  actuation: ['nginx', 'wrk'],
};

/**
 * What a run of `mode` needs. `args` narrows a run to files or directories;
 * a narrowed run needs only what its files need. For `bench`, `args` is the
 * benchmark's name.
 */
export function needsOf(mode: string, args: readonly string[], services: { postgres: boolean; dynamodb: boolean }): Need[] {
  const needs = new Set<Need>();
  if (services.postgres) needs.add('postgres');
  if (services.dynamodb) needs.add('java');
  const paths = args.filter((a) => !a.startsWith('-'));
  if (mode === 'chaos') needs.add('nginx');
  if (mode === 'bench') BENCH_NEEDS[args[0] ?? '']?.forEach((x) => needs.add(x));
  const runsTests = ['all', 'e2e', 'contract', 'integration', 'security'].includes(mode);
  if (runsTests) {
    const scope = paths.length ? paths : mode === 'all' ? ['test'] : [`test/${mode}`];
    // vitest takes each argument as a filter matching any file whose path contains it (`-- prometheus` runs them all).
    for (const [file, n] of Object.entries(FILE_NEEDS)) {
      if (scope.some((p) => file.includes(p.replace(/^\.\//, '').replace(/\/$/, '')))) n.forEach((x) => needs.add(x));
    }
  }
  return [...needs];
}

/**
 * Make sure every needed package is there: installs the missing ones as root,
 * else returns the one line to print before stopping. `optional` ones (the
 * network namespace) are installed when possible but never stop a run.
 */
export function ensurePackages(needs: readonly Need[], optional: readonly Need[] = []): { ok: true; installed: string[] } | { ok: false; message: string } {
  const missing = (list: readonly Need[]) => [...new Set(list.filter((n) => !REQUIREMENTS[n].present()).map((n) => REQUIREMENTS[n].pkg))];
  const required = missing(needs);
  const wanted = [...new Set([...required, ...missing(optional)])];
  if (!wanted.length) return { ok: true, installed: [] };
  const command = `apt-get install -y --no-install-recommends ${required.join(' ')}`;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!isRoot) {
    if (!required.length) return { ok: true, installed: [] };
    return { ok: false, message: `[harness] missing Debian packages: ${required.join(' ')} (${describe(needs)}); run: sudo apt-get update && sudo ${command}` };
  }
  process.stderr.write(`[harness] installing Debian packages: ${wanted.join(' ')}\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const update = spawnSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'inherit', 'inherit'], env });
  const install =
    update.status === 0
      ? spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...wanted], { stdio: ['ignore', 'inherit', 'inherit'], env })
      : update;
  const still = missing(needs);
  if (still.length) {
    const why = install.error ? install.error.message : `apt-get exited ${install.status}`;
    return {
      ok: false,
      message: `[harness] could not install Debian packages ${still.join(' ') || wanted.join(' ')} (${why}); run: apt-get update && ${command}`,
    };
  }
  return { ok: true, installed: wanted };
}

function describe(needs: readonly Need[]): string {
  return needs
    .filter((n) => !REQUIREMENTS[n].present())
    .map((n) => `${REQUIREMENTS[n].pkg} for ${REQUIREMENTS[n].why}`)
    .join(', ');
}
