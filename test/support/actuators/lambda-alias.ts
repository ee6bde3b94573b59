/**
 * A Lambda alias on moto, behind the RevisionId proxy, for the actuator
 * tests: a fresh function with versions 1 and 2 and an alias `live` → 1,
 * so the new version is "2". The actuator talks to the proxy; the function
 * is set up on moto directly.
 */
import {
  CreateAliasCommand,
  CreateFunctionCommand,
  DeleteFunctionCommand,
  GetAliasCommand,
  LambdaClient,
  PublishVersionCommand,
  UpdateAliasCommand,
  UpdateFunctionConfigurationCommand,
} from '@aws-sdk/client-lambda';
import { randomUUID } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { LambdaAliasActuator } from '../../../shared/adapters/actuators/lambda-alias/actuator.js';
import { sigv4Headers } from '../../../shared/adapters/http/sigv4.js';
import { LambdaRevisionProxy } from '../lambda/revision-proxy.js';
import type { ActuatorFixture, ActuatorUnderTest } from './fixture.js';

export const LAMBDA_REGION = 'eu-west-3';
export const LAMBDA_ACCOUNT = '123456789012'; // moto's
export const LAMBDA_ROLE = `arn:aws:iam::${LAMBDA_ACCOUNT}:role/x`;
const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };
const STABLE = '1';
const NEW = '2';

export interface LambdaAliasUnderTest extends ActuatorUnderTest {
  readonly actuator: LambdaAliasActuator;
  readonly functionName: string;
  readonly alias: string;
  readonly stableVersion: string;
  /** An SDK client through the proxy (Lambda's alias rules), and one on moto itself. */
  readonly viaProxy: LambdaClient;
  readonly onMoto: LambdaClient;
  readonly proxy: LambdaRevisionProxy;
  measuredPercent(): Promise<number>;
}

export function lambdaClient(endpoint: string): LambdaClient {
  return new LambdaClient({ region: LAMBDA_REGION, endpoint, credentials: CREDENTIALS });
}

export function lambdaAliasFixture(motoUrl: string): ActuatorFixture {
  return { kind: 'lambdaAlias', setup: () => setupLambdaAlias(motoUrl) };
}

export async function setupLambdaAlias(motoUrl: string): Promise<LambdaAliasUnderTest> {
  await ensureRole(motoUrl);
  const onMoto = lambdaClient(motoUrl);
  const functionName = `rollout-${randomUUID().slice(0, 8)}`;
  const alias = 'live';
  await onMoto.send(
    new CreateFunctionCommand({
      FunctionName: functionName,
      Runtime: 'nodejs20.x',
      Role: LAMBDA_ROLE,
      Handler: 'index.handler',
      Code: { ZipFile: zipOne('index.js', 'exports.handler = async () => "v1";\n') },
    }),
  );
  const published = [(await onMoto.send(new PublishVersionCommand({ FunctionName: functionName }))).Version];
  // Lambda (and moto) publish nothing new for an unchanged function.
  await onMoto.send(new UpdateFunctionConfigurationCommand({ FunctionName: functionName, Description: 'second' }));
  published.push((await onMoto.send(new PublishVersionCommand({ FunctionName: functionName }))).Version);
  if (published.join() !== `${STABLE},${NEW}`)
    throw new Error(`expected versions ${STABLE} and ${NEW} on a fresh function, moto published ${published.join(', ')}`);

  const proxy = await new LambdaRevisionProxy(motoUrl).start();
  const viaProxy = lambdaClient(proxy.url);
  await viaProxy.send(new CreateAliasCommand({ FunctionName: functionName, Name: alias, FunctionVersion: STABLE }));
  const actuator = new LambdaAliasActuator(functionName, { type: 'lambdaAlias', functionName, alias, region: LAMBDA_REGION }, viaProxy);

  return {
    actuator,
    newVersion: NEW,
    functionName,
    alias,
    stableVersion: STABLE,
    viaProxy,
    onMoto,
    proxy,
    // Nothing runs on moto: the share is what the alias's routing states.
    async measuredPercent() {
      const a = await onMoto.send(new GetAliasCommand({ FunctionName: functionName, Name: alias }));
      const weights = a.RoutingConfig?.AdditionalVersionWeights ?? {};
      const share = a.FunctionVersion === NEW ? 1 - Object.entries(weights).reduce((sum, [v, w]) => (v === NEW ? sum : sum + w), 0) : (weights[NEW] ?? 0);
      return Math.round(share * 10_000) / 100;
    },
    // As a person would in the console: the current RevisionId, the weight changed, the description left alone.
    async tamper(percent: number) {
      const a = await viaProxy.send(new GetAliasCommand({ FunctionName: functionName, Name: alias }));
      await viaProxy.send(
        new UpdateAliasCommand({
          FunctionName: functionName,
          Name: alias,
          ...(a.FunctionVersion === NEW ? { FunctionVersion: STABLE } : {}),
          RoutingConfig: { AdditionalVersionWeights: percent > 0 ? { [NEW]: Math.round(percent * 100) / 10_000 } : {} },
          RevisionId: a.RevisionId,
        }),
      );
    },
    async close() {
      await proxy.stop();
      await onMoto.send(new DeleteFunctionCommand({ FunctionName: functionName })).catch(() => undefined);
      viaProxy.destroy();
      onMoto.destroy();
    },
  };
}

/** moto's CreateFunction wants the role to exist in its IAM (AWS checks it can be assumed). */
async function ensureRole(motoUrl: string): Promise<void> {
  const url = new URL('/', motoUrl);
  const body = new URLSearchParams({
    Action: 'CreateRole',
    Version: '2010-05-08',
    RoleName: LAMBDA_ROLE.split('/').pop()!,
    AssumeRolePolicyDocument: JSON.stringify({
      Version: '2012-10-17',
      Statement: [{ Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' }, Action: 'sts:AssumeRole' }],
    }),
  }).toString();
  // No IAM client among the dependencies: the Query API, signed as the SDK would (IAM is global, signed for us-east-1).
  const headers = await sigv4Headers(
    { service: 'iam', region: 'us-east-1', credentials: () => Promise.resolve(CREDENTIALS) },
    { method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }, body },
  );
  const res = await fetch(url, { method: 'POST', headers, body });
  const text = await res.text();
  if (!res.ok && !text.includes('EntityAlreadyExists')) throw new Error(`moto IAM CreateRole: ${res.status} ${text.slice(0, 300)}`);
}

/** A zip archive of one file, stored (not deflated): all a CreateFunction needs. */
export function zipOne(name: string, content: string): Uint8Array {
  const file = Buffer.from(name);
  const data = Buffer.from(content);
  const crc = crc32(data);
  const dosDate = 0x21; // 1980-01-01
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt16LE(dosDate, 12);
  local.writeUInt32LE(crc, 14);
  local.writeUInt32LE(data.length, 18);
  local.writeUInt32LE(data.length, 22);
  local.writeUInt16LE(file.length, 26);
  const central = Buffer.alloc(46);
  central.writeUInt32LE(0x02014b50, 0);
  central.writeUInt16LE(20, 4);
  central.writeUInt16LE(20, 6);
  central.writeUInt16LE(dosDate, 14);
  central.writeUInt32LE(crc, 16);
  central.writeUInt32LE(data.length, 20);
  central.writeUInt32LE(data.length, 24);
  central.writeUInt16LE(file.length, 28);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(1, 8);
  end.writeUInt16LE(1, 10);
  end.writeUInt32LE(central.length + file.length, 12);
  end.writeUInt32LE(local.length + file.length + data.length, 16);
  return Buffer.concat([local, file, data, central, file, end]);
}
