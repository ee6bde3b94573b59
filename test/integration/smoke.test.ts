/** The 3-node smoke (1 coordinator + 3 workers) in both modes, as `npm run smoke:3node` runs it. */
import { describe, expect, it } from 'vitest';
import { smoke, summaryLine } from '../smoke/three-node.js';

describe.each(['local', 'sqs'] as const)('3-node smoke over %s', (mode) => {
  it('the run is done, with at least one steal and no duplicate result', async () => {
    const s = await smoke(mode);
    console.log(summaryLine(s));
    expect(s.done).toBe(s.items);
    expect(s.steals).toBeGreaterThan(0);
    expect(s.duplicates).toBe(0);
    // A budget for a hang, not a speed: ~35 s on an idle 2-core machine, and three nodes' start-up beside it on a busy one.
  }, 300_000);
});
