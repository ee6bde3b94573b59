import type { StealNotice } from '../../ledger/coordinator.js';
import { noticeFromReply, type CoordinatorRequest } from '../../ledger/coordinator-protocol.js';
import type { CoordinatorClient } from '../../ledger/worker.js';

/** A coordinator served over HTTP (a cluster node's POST /coordinator, or nginx in front of the nodes): POST <url> with the request as JSON. */
export class HttpCoordinatorClient implements CoordinatorClient {
  constructor(
    private readonly url: string,
    private readonly runId: string,
  ) {}

  async requestWork(workerId: string): Promise<StealNotice> {
    const request: CoordinatorRequest = { action: 'steal', runId: this.runId, workerId };
    let url = this.url;
    for (let hop = 0; ; hop++) {
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(request), signal: AbortSignal.timeout(10_000) });
      const text = await res.text();
      // A follower node names the leader, which runs the coordinators: ask it once.
      const leader = res.headers.get('x-rollout-leader-url');
      if (res.status === 503 && leader && hop === 0) {
        url = new URL(new URL(this.url).pathname, leader).toString();
        continue;
      }
      if (!res.ok) throw new Error(`coordinator ${url}: HTTP ${res.status} ${text.slice(0, 300)}`);
      return noticeFromReply(JSON.parse(text) as unknown, url);
    }
  }
}
