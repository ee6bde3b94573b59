import { call, type Target } from '../../client/transport.js';
import type { OptionSpec } from './command-spec.js';
import { readPem } from './io.js';

/** The options every client command takes, after its own: where the control plane is, and output as JSON. */
export const TARGET_OPTIONS: readonly OptionSpec[] = [
  {
    flags: '--url <url>',
    description: 'the control plane: a local node, a load balancer, or the deployed API URL',
    env: 'ROLLOUT_URL',
    default: 'http://127.0.0.1:8000',
  },
  {
    flags: '--aws-region <region>',
    description: 'sign requests with SigV4 for the deployed HTTP API in this region (credentials from the AWS chain)',
    env: 'ROLLOUT_AWS_REGION',
  },
  { flags: '--token <token>', description: 'a bearer token for a node with authentication on: ours (rollout auth token) or an OIDC JWT', env: 'ROLLOUT_TOKEN' },
  { flags: '--ca-file <pem>', description: "the CA a node's HTTPS certificate chains to, when the system does not trust it", env: 'ROLLOUT_CA_FILE' },
  {
    flags: '--actor <name>',
    description: 'who is acting, for a node with authentication off (with it on, the credential names you; the deployed API uses your IAM identity)',
  },
  { flags: '--json', description: 'print the response as JSON', default: false },
];

export type ClientOpts = { url: string; awsRegion?: string; actor?: string; token?: string; caFile?: string; json: boolean };

export function targetOf(o: ClientOpts, sign?: { reporter: string; secret: string }): Target {
  return {
    url: o.url,
    ...(o.awsRegion ? { awsRegion: o.awsRegion } : {}),
    ...(o.actor ? { actor: o.actor } : {}),
    ...(o.token ? { token: o.token } : {}),
    ...(o.caFile ? { ca: readPem(o.caFile) } : {}),
    ...(sign ? { sign } : {}),
  };
}

/** Sends one request and prints the answer: the JSON with --json, else `human` of it. */
export async function run(
  o: ClientOpts,
  method: string,
  path: string,
  body: unknown,
  human: (r: unknown) => string,
  sign?: { reporter: string; secret: string },
): Promise<void> {
  const res = await call(targetOf(o, sign), method, path, body);
  process.stdout.write(`${o.json ? JSON.stringify(res, null, 2) : human(res)}\n`);
}
