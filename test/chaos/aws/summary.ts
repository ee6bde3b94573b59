import { countByInvariant } from '../check.js';
import type { ChaosHistory, Violation } from '../history.js';

/** A schedule at a glance: what was asked and answered, what was broken, what the store went through, what the checker found. */
export function summary(h: ChaosHistory, violations: readonly Violation[], seconds: number): string {
  const count = <T>(xs: readonly T[], key: (x: T) => string) => {
    const m: Record<string, number> = {};
    for (const x of xs) m[key(x)] = (m[key(x)] ?? 0) + 1;
    return m;
  };
  const ops = count(h.ops, (o) => `${o.kind} ${o.outcome}`);
  const epochs = [...new Set(h.store.leaseChanges.filter((c) => c.name === 'promotion_leader' && c.holder).map((c) => `${c.holder}@${c.epoch}`))];
  const items = count(h.store.items, (i) => i.state);
  const rollouts = h.store.rollouts.map((r) => `${r.id} ${r.state}${r.reason ? ` (${r.reason.slice(0, 40)})` : ''}`);
  const killed = h.processes.filter((p) => p.end === 'killed').length;
  const lines = [
    `aws schedule ${h.seed}/${h.schedule}${h.variant ? ` variant ${h.variant}` : ''}: ${seconds.toFixed(1)} s; faults until ${(h.phases.faultsUntil / 1000).toFixed(1)} s, healed ${(h.phases.healedAt / 1000).toFixed(1)} s, quiet until ${(h.phases.quietUntil / 1000).toFixed(1)} s`,
    `  ops ${h.ops.length}: ${Object.entries(ops)
      .sort()
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
    `  faults ${h.faults.length}: ${Object.entries(count(h.faults, (f) => f.kind))
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
    `  processes ${h.processes.length} (${killed} killed): ${Object.entries(count(h.processes, (p) => p.role))
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
    `  store: ${h.store.leaseChanges.length} lease changes (promotion_leader terms ${epochs.join(', ') || 'none'}), ${h.store.writes.length} fenced writes, ${h.store.stageTransitions.length} stage / ${h.store.rolloutTransitions.length} rollout / ${h.store.itemTransitions.length} item transitions`,
    `  rollouts: ${rollouts.join('; ')}`,
    `  items: ${Object.entries(items)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
    `  violations ${violations.length}${violations.length ? `: ${JSON.stringify(countByInvariant(violations))}` : ''}`,
  ];
  return lines.join('\n');
}
