import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import type { StealNotice } from '../../ledger/coordinator.js';
import { noticeFromReply, type CoordinatorRequest } from '../../ledger/coordinator-protocol.js';
import type { CoordinatorClient } from '../../ledger/worker/index.js';

/** The coordinator Lambda, invoked synchronously. */
export class LambdaCoordinatorClient implements CoordinatorClient {
  constructor(
    private readonly lambda: LambdaClient,
    private readonly functionName: string,
    private readonly runId: string,
  ) {}

  async requestWork(workerId: string): Promise<StealNotice> {
    const request: CoordinatorRequest = { action: 'steal', runId: this.runId, workerId };
    const res = await this.lambda.send(new InvokeCommand({ FunctionName: this.functionName, Payload: new TextEncoder().encode(JSON.stringify(request)) }));
    const body = res.Payload ? new TextDecoder().decode(res.Payload) : '';
    if (res.FunctionError) throw new Error(`coordinator ${this.functionName} failed: ${res.FunctionError}: ${body.slice(0, 300)}`);
    return noticeFromReply(JSON.parse(body) as unknown, this.functionName);
  }
}
