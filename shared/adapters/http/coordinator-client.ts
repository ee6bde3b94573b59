import type { StealNotice } from '../../ledger/coordinator.js';
import { noticeFromReply, type CoordinatorRequest } from '../../ledger/coordinator-protocol.js';
import type { CoordinatorClient } from '../../ledger/worker/index.js';
import { send } from './client.js';

/**
 * A coordinator served over HTTP (a cluster node's POST /coordinator, or nginx
 * in front of the nodes): POST <url> with the request as JSON, with a bearer
 * token (scope `worker`) when the node asks for one.
 */
export class HttpCoordinatorClient implements CoordinatorClient {
  constructor(
    private readonly url: string,
    private readonly runId: string,
    private readonly auth: { readonly token?: string; readonly ca?: string | Buffer } = {},
  ) {}

  async requestWork(workerId: string): Promise<StealNotice> {
    const request: CoordinatorRequest = { action: 'steal', runId: this.runId, workerId };
    let url = new URL(this.url);
    for (let hop = 0; ; hop++) {
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        ...(this.auth.token ? { authorization: `Bearer ${this.auth.token}` } : {}),
      };
      const res = await send(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(request),
        timeoutMs: 10_000,
        ...(this.auth.ca ? { tls: { ca: this.auth.ca } } : {}),
      });
      // A follower node names the leader, which runs the coordinators: ask it once, on the same scheme (the token goes nowhere in the clear).
      const leader = res.header('x-rollout-leader-url');
      if (res.status === 503 && leader && hop === 0 && new URL(leader).protocol === url.protocol) {
        url = new URL(url.pathname, leader);
        continue;
      }
      if (res.status < 200 || res.status >= 300) throw new Error(`coordinator ${url.origin}${url.pathname}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
      return noticeFromReply(JSON.parse(res.text) as unknown, url.toString());
    }
  }
}
