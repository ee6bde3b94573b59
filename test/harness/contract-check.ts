import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { openApiDocument } from '../../shared/api/contract.js';

/**
 * Every answer the API gives during the suites (in process and in the nodes
 * they start, contract-record.mjs) is checked against the OpenAPI
 * document once they end (run.ts): an answer whose status the route does not
 * declare, or whose body does not validate against the document (Ajv, draft
 * 2020-12), fails the run, named with what is wrong.
 */
/** One answer as contract-record.mjs writes it. */
export interface RecordedAnswer {
  readonly route: string;
  readonly status: number;
  readonly contentType: string | null;
  readonly body: unknown;
}

type Operation = { responses: Record<string, { content?: Record<string, unknown> }> };

/** Each recorded answer checked against the document: what is wrong with those that fail it. */
export function checkAnswers(doc: Record<string, unknown>, answers: readonly RecordedAnswer[]): { failures: string[]; routes: Set<string> } {
  const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
  ajv.addSchema(doc, 'openapi');
  const ops = new Map<string, { pointer: string; op: Operation }>();
  for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, Operation & { operationId: string }>>)) {
    for (const [method, op] of Object.entries(methods))
      ops.set(op.operationId, { pointer: `/paths/${path.replaceAll('~', '~0').replaceAll('/', '~1')}/${method}`, op });
  }
  const compiled = new Map<string, ValidateFunction>();
  const failures: string[] = [];
  const routes = new Set<string>();
  for (const a of answers) {
    routes.add(a.route);
    const found = ops.get(a.route);
    if (!found) {
      failures.push(`${a.route}: answered, but the document has no such operation`);
      continue;
    }
    const declared = found.op.responses[String(a.status)];
    if (!declared && a.status < 400) {
      failures.push(`${a.route} ${a.status}: a status the document does not declare for it`);
      continue;
    }
    const status = declared ? String(a.status) : 'default';
    const content = found.op.responses[status]!.content;
    if (a.contentType === null) {
      if (content) failures.push(`${a.route} ${a.status}: answered without a body; the document declares one`);
      continue;
    }
    const type = a.contentType.split(';')[0]!.trim();
    const media = content?.[type] as { schema?: unknown } | undefined;
    if (!media) {
      failures.push(`${a.route} ${a.status}: answered ${type}; the document declares ${content ? Object.keys(content).join(', ') : 'no body'}`);
      continue;
    }
    if (!media.schema) continue;
    const ref = `openapi#${found.pointer}/responses/${status}/content/${type.replaceAll('/', '~1')}/schema`;
    let validate = compiled.get(ref);
    if (!validate) compiled.set(ref, (validate = ajv.getSchema(ref)!));
    if (!validate(a.body))
      failures.push(`${a.route} ${a.status}: ${ajv.errorsText(validate.errors, { separator: '; ' })} in ${JSON.stringify(a.body).slice(0, 300)}`);
  }
  return { failures, routes };
}

/** The answers recorded in `dir` checked: a summary line, and what failed (at most 30, each once). */
export function checkRecorded(dir: string): { line: string; failures: string[] } {
  const answers: RecordedAnswer[] = [];
  for (const f of readdirSync(dir)) {
    for (const line of readFileSync(join(dir, f), 'utf8').split('\n')) if (line) answers.push(JSON.parse(line) as RecordedAnswer);
  }
  const doc = openApiDocument();
  const { failures, routes } = checkAnswers(doc, answers);
  const operations = Object.values(doc.paths as Record<string, object>).reduce((n, m) => n + Object.keys(m).length, 0);
  const unique = [...new Set(failures)];
  return {
    line: `contract: ${answers.length} answers of ${routes.size} of ${operations} operations checked against the OpenAPI document, ${unique.length} not matching`,
    failures: unique.slice(0, 30),
  };
}
