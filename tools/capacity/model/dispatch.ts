/** dispatch.ts (shared/ledger/dispatch.ts): messages out, then each item recorded sent. */
import { failedWrite, itemWrite, moveCounts } from './ledger-store.js';
import { pushMessages } from './queue.js';
import { type Proc, sqs } from './requests.js';
import type { Client } from './sdk.js';
import type { SimState } from './state.js';

/** dispatch.ts: every message out (10 a call, one call after another), then each recorded sent (markSent). */
export function* dispatch(sim: SimState, items: readonly number[], client: Client, concurrency: number): Proc<boolean> {
  for (let i = 0; i < items.length; i += 10) {
    yield { op: 'all', reqs: [sqs(sim, client)], limit: 1 };
    pushMessages(sim, items.slice(i, i + 10));
  }
  const marks = items.map((i) => {
    if (sim.state[i] !== 1) return failedWrite(sim, i, client); // claimed meanwhile: the condition refuses it
    const r = itemWrite(sim, i, 'markSent', client);
    r.onOk = () => {
      if (sim.sentRecorded[i]) return;
      sim.sentRecorded[i] = 1;
      moveCounts(sim, i, sim.unsentCnt, null);
    };
    return r;
  });
  return yield { op: 'all', reqs: marks, limit: concurrency };
}
