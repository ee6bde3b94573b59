import type { FencedError } from '../lease/fencing.js';

/**
 * The process-level end of self-fencing: once the coordinator has emitted its
 * single coordinator_fenced event, the process exits (code 75, EX_TEMPFAIL,
 * so a supervisor restarts it as a fresh contender). A hard timer guarantees
 * the exit within `withinMs` even if something keeps the event loop busy.
 */
export function exitOnFence(options: { code?: number; withinMs?: number; log?: (line: string) => void } = {}): (err: FencedError) => void {
  const code = options.code ?? 75;
  const withinMs = options.withinMs ?? 5_000;
  return (err) => {
    options.log?.(`coordinator deposed (${err.message}); exiting with ${code}`);
    setTimeout(() => process.exit(code), withinMs).unref();
    process.exitCode = code;
    setImmediate(() => process.exit(code));
  };
}
