/**
 * Lambda's alias API on moto, with the alias rules moto lacks. moto (an AWS
 * emulator) keeps the functions, versions and aliases with their
 * RoutingConfig, and every request is forwarded to it; the one part that is
 * ours is what its UpdateAlias does not do (moto 5.2.1 neither changes nor
 * checks `RevisionId`, and stores any RoutingConfig it is given):
 *  - a RevisionId per alias, fresh on CreateAlias and on every successful
 *    UpdateAlias, written into GetAlias / CreateAlias / UpdateAlias /
 *    ListAliases answers in place of moto's, which never changes;
 *  - UpdateAlias with a RevisionId that is not the current one: 412
 *    PreconditionFailedException, as Lambda answers, nothing forwarded;
 *  - RoutingConfig as Lambda's API reference and developer guide state it:
 *    at most one additional version, a weight in [0.0, 1.0], a published
 *    version that exists and is not the alias's own, never with `$LATEST` as
 *    the alias's version. Refused with 400 InvalidParameterValueException.
 *    (Lambda answers a weight out of range or a key that is not digits with a
 *    model ValidationException; one exception for all keeps callers simple.)
 * An alias first seen without a CreateAlias through here (made on moto
 * directly) starts from moto's RevisionId.
 *
 * Every alias request of a function is handled in turn, so a conditioned
 * update is checked and applied as one step and no answer pairs an alias's
 * content with a RevisionId minted for another content.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { forwardHttp, type Forwarded } from '../http-forward.js';

const ALIASES = /^\/2015-03-31\/functions\/([^/]+)\/aliases(?:\/([^/]+))?$/;
const FUNCTION = /^\/2015-03-31\/functions\/([^/]+)$/;
const VERSION = /^[0-9]+$/;

interface Alias {
  Name?: string;
  FunctionVersion?: string;
  RevisionId?: string;
  RoutingConfig?: { AdditionalVersionWeights?: Record<string, unknown> } | null;
}

/** Lambda's error answer: the header the SDK keys on first, and the body Lambda sends. */
function lambdaError(status: number, type: string, message: string): Forwarded {
  const body = Buffer.from(JSON.stringify({ Type: 'User', message }));
  return {
    status,
    headers: { 'content-type': 'application/json', 'content-length': String(body.length), 'x-amzn-errortype': type, 'x-amzn-requestid': randomUUID() },
    body,
  };
}

const STALE = 'The Revision Id provided does not match the latest Revision Id. Call the GetFunction/GetAlias API to retrieve the latest Revision Id';

export class LambdaRevisionProxy {
  /** What AWS_ENDPOINT_URL_LAMBDA, or a client's `endpoint`, names. */
  url = '';
  private server: Server | null = null;
  private readonly upstream: URL;
  /** "region function alias" → the RevisionId Lambda would report. */
  private readonly revisions = new Map<string, string>();
  /** "region function" → the tail of its queue of alias requests. */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(moto: string) {
    this.upstream = new URL(moto);
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        // Through a promise, so a malformed path (decodeURIComponent throws) is answered, not a crash.
        Promise.resolve()
          .then(() => this.handle(req.method ?? 'GET', req.url ?? '/', req.headers, Buffer.concat(chunks)))
          .then(
            (answer) => res.writeHead(answer.status, answer.headers).end(answer.body),
            (err: Error) => res.writeHead(502).end(err.message),
          );
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }

  private handle(method: string, url: string, headers: IncomingHttpHeaders, body: Buffer): Promise<Forwarded> {
    const path = url.split('?')[0]!;
    const aliases = ALIASES.exec(path);
    const fn = aliases ?? (method === 'DELETE' && !url.includes('?') ? FUNCTION.exec(path) : null);
    if (!fn) return this.forward(method, url, headers, body);
    const scope = functionScope(decodeURIComponent(fn[1]!), headers);
    const alias = aliases?.[2] !== undefined ? decodeURIComponent(aliases[2]) : undefined;
    return this.inTurn(scope, async () => {
      if (!aliases) return this.deleteFunction(scope, method, url, headers, body);
      if (alias === undefined && method === 'GET') return this.listAliases(scope, method, url, headers, body);
      if (alias === undefined && method === 'POST') return this.createAlias(scope, fn[1]!, method, url, headers, body);
      if (alias !== undefined && method === 'GET') return this.getAlias(scope, alias, method, url, headers, body);
      if (alias !== undefined && method === 'PUT') return this.updateAlias(scope, fn[1]!, alias, method, url, headers, body);
      if (alias !== undefined && method === 'DELETE') {
        const answer = await this.forward(method, url, headers, body);
        if (ok(answer)) this.revisions.delete(`${scope} ${alias}`);
        return answer;
      }
      return this.forward(method, url, headers, body);
    });
  }

  private async getAlias(scope: string, alias: string, ...req: Request): Promise<Forwarded> {
    const answer = await this.forward(...req);
    return ok(answer) ? rewrite(answer, (a: Alias) => ({ ...a, RevisionId: this.revision(scope, alias, a.RevisionId) })) : answer;
  }

  private async listAliases(scope: string, ...req: Request): Promise<Forwarded> {
    const answer = await this.forward(...req);
    if (!ok(answer)) return answer;
    return rewrite(answer, (list: { Aliases?: Alias[] }) => ({
      ...list,
      Aliases: (list.Aliases ?? []).map((a) => ({ ...a, RevisionId: this.revision(scope, a.Name ?? '', a.RevisionId) })),
    }));
  }

  private async createAlias(scope: string, rawFn: string, ...req: Request): Promise<Forwarded> {
    const [, , headers, body] = req;
    const asked = parse<Alias>(body);
    if (asked) {
      const refusal = await this.routingIssue(rawFn, headers, asked.FunctionVersion, asked.RoutingConfig);
      if (refusal) return lambdaError(400, 'InvalidParameterValueException', refusal);
    }
    const answer = await this.forward(...req);
    if (!ok(answer)) return answer;
    return rewrite(answer, (a: Alias) => {
      const revision = randomUUID();
      this.revisions.set(`${scope} ${a.Name ?? asked?.Name ?? ''}`, revision);
      return { ...a, RevisionId: revision };
    });
  }

  private async updateAlias(scope: string, rawFn: string, alias: string, ...req: Request): Promise<Forwarded> {
    const [, , headers, body] = req;
    const asked = parse<Alias>(body);
    const current = await this.forward('GET', `/2015-03-31/functions/${rawFn}/aliases/${encodeURIComponent(alias)}`, readHeaders(headers), Buffer.alloc(0));
    const now = ok(current) ? parse<Alias>(current.body) : null;
    // An alias or function that does not exist, or a body that is not JSON: moto's answer is Lambda's.
    if (!asked || !now) return this.forward(...req);
    if (asked.RevisionId !== undefined && asked.RevisionId !== this.revision(scope, alias, now.RevisionId))
      return lambdaError(412, 'PreconditionFailedException', STALE);
    if (asked.FunctionVersion !== undefined || asked.RoutingConfig !== undefined) {
      // What the alias will carry: a field left out of the request keeps its value.
      const version = asked.FunctionVersion ?? now.FunctionVersion;
      const routing = asked.RoutingConfig !== undefined ? asked.RoutingConfig : now.RoutingConfig;
      const refusal = await this.routingIssue(rawFn, headers, version, routing);
      if (refusal) return lambdaError(400, 'InvalidParameterValueException', refusal);
    }
    const answer = await this.forward(...req);
    if (!ok(answer)) return answer;
    const revision = randomUUID();
    this.revisions.set(`${scope} ${alias}`, revision);
    return rewrite(answer, (a: Alias) => ({ ...a, RevisionId: revision }));
  }

  private async deleteFunction(scope: string, ...req: Request): Promise<Forwarded> {
    const answer = await this.forward(...req);
    if (ok(answer)) for (const key of [...this.revisions.keys()]) if (key.startsWith(`${scope} `)) this.revisions.delete(key);
    return answer;
  }

  /** Why Lambda would refuse this routing on an alias of `version`; null when it would not. */
  private async routingIssue(
    rawFn: string,
    headers: IncomingHttpHeaders,
    version: string | undefined,
    routing: Alias['RoutingConfig'],
  ): Promise<string | null> {
    const weights = Object.entries(routing?.AdditionalVersionWeights ?? {});
    if (weights.length === 0) return null;
    if (weights.length > 1)
      return `Number of items in AdditionalVersionWeights cannot be greater than 1 (got ${weights.length}: ${weights.map(([v]) => v).join(', ')})`;
    const [extra, weight] = weights[0]!;
    const shown = `{${extra}=${String(weight)}}`;
    if (typeof weight !== 'number' || !Number.isFinite(weight) || weight < 0 || weight > 1) {
      return `Value '${shown}' at 'routingConfig.additionalVersionWeights' failed to satisfy constraint: Map value must satisfy constraint: [Member must have value less than or equal to 1.0, Member must have value greater than or equal to 0.0, Member must not be null]`;
    }
    if (!VERSION.test(extra)) {
      return `Value '${shown}' at 'routingConfig.additionalVersionWeights' failed to satisfy constraint: Map keys must satisfy constraint: [Member must satisfy regular expression pattern: [0-9]+] (an additional version must be a published version, not ${extra})`;
    }
    if (version === undefined) return null; // moto refuses a CreateAlias without one
    if (version.toUpperCase() === '$LATEST') return '$LATEST is not supported for an alias pointing to more than 1 version';
    if (extra === version) return `Invalid function version ${version}. Function version ${version} is already included in routing configuration.`;
    const found = await this.forward(
      'GET',
      `/2015-03-31/functions/${rawFn}/configuration?Qualifier=${encodeURIComponent(extra)}`,
      readHeaders(headers),
      Buffer.alloc(0),
    );
    if (found.status === 404)
      return `Version ${extra} of function ${decodeURIComponent(rawFn)} does not exist: AdditionalVersionWeights must name a published version`;
    if (!ok(found)) throw new Error(`moto answered ${found.status} looking up version ${extra}: ${found.body.toString().slice(0, 200)}`);
    return null;
  }

  /** The alias's RevisionId; one never seen here starts from moto's. */
  private revision(scope: string, alias: string, moto: string | undefined): string {
    const key = `${scope} ${alias}`;
    let revision = this.revisions.get(key);
    if (revision === undefined) {
      revision = moto ?? randomUUID();
      this.revisions.set(key, revision);
    }
    return revision;
  }

  private inTurn<T>(scope: string, work: () => Promise<T>): Promise<T> {
    const before = this.queues.get(scope) ?? Promise.resolve();
    const mine = before.then(work, work);
    const tail = mine.catch(() => undefined);
    this.queues.set(scope, tail);
    void tail.then(() => {
      if (this.queues.get(scope) === tail) this.queues.delete(scope);
    });
    return mine;
  }

  private forward(...[method, url, headers, body]: Request): Promise<Forwarded> {
    return forwardHttp(this.upstream, headers, body, method, url);
  }
}

type Request = [method: string, url: string, headers: IncomingHttpHeaders, body: Buffer];

/** Start a proxy in front of moto's Lambda API; `url` is its endpoint. */
export function startLambdaRevisionProxy(moto: string): Promise<LambdaRevisionProxy> {
  return new LambdaRevisionProxy(moto).start();
}

const ok = (a: Forwarded) => a.status >= 200 && a.status < 300;

function parse<T>(body: Buffer): T | null {
  try {
    const v = JSON.parse(body.toString('utf8')) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as T) : null;
  } catch {
    return null;
  }
}

/** The answer with its JSON body changed; left as it came when the body is not JSON. */
function rewrite<T>(answer: Forwarded, change: (v: T) => unknown): Forwarded {
  const v = parse<T>(answer.body);
  if (v === null) return answer;
  const body = Buffer.from(JSON.stringify(change(v)));
  const headers = { ...answer.headers, 'content-length': String(body.length) };
  delete headers['transfer-encoding'];
  return { ...answer, headers, body };
}

/** The caller's headers for a lookup of our own: no body (moto does not check signatures). */
function readHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const h = { ...headers };
  for (const k of ['content-length', 'content-type', 'transfer-encoding', 'expect']) delete h[k];
  return h;
}

/**
 * Which function a request is about, as "region name": a function is named
 * by name, ARN or partial ARN; the region comes from an ARN, else from the
 * request's signature.
 */
function functionScope(fn: string, headers: IncomingHttpHeaders): string {
  const arn = /^(?:arn:[^:]+:lambda:([^:]+):)?(?:\d{12}:)?function:([^:]+)/.exec(fn);
  const name = arn ? arn[2]! : fn.split(':')[0]!;
  const signed = /Credential=[^/]+\/\d{8}\/([^/]+)\//.exec(String(headers.authorization ?? ''));
  return `${arn?.[1] ?? signed?.[1] ?? ''} ${name}`;
}
