/**
 * One Lambda sandbox as an OS process, so the nemesis can kill it with
 * SIGKILL in the middle of an invocation, as Lambda does on a time-out.
 *
 *   node --import tsx [--import <loader>]… test/chaos/aws/lambda-runtime.ts <handler module>
 *
 * It loads the module once (a cold start) and serves invocations one at a
 * time, as a sandbox does, over the IPC channel: stdout and stderr stay the
 * function's log, as in Lambda. The module's `handler` gets the event and a
 * context whose remaining time counts down to the invocation's deadline.
 */
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';

interface Invocation {
  readonly id: number;
  readonly event: unknown;
  /** Wall-clock ms when the invocation times out. */
  readonly deadline: number;
}

type Handler = (event: unknown, context: unknown) => Promise<unknown>;

const modulePath = process.argv[2];
if (!modulePath || !process.send) {
  console.error('usage: node --import tsx lambda-runtime.ts <handler module> (with an IPC channel)');
  process.exit(2);
}
const send = (m: unknown) => process.send!(m);
const mod = (await import(pathToFileURL(modulePath).href)) as { handler?: Handler };
const handler = mod.handler;
if (typeof handler !== 'function') throw new Error(`${modulePath} exports no handler`);
const functionName = process.env.AWS_LAMBDA_FUNCTION_NAME ?? modulePath;

// The platform's own lines (START / END / REPORT in Lambda), so a sandbox's log shows where an invocation stood when it died.
const platform = (line: string) => process.stderr.write(`${new Date().toISOString()} ${line}\n`);

process.on('message', (m: Invocation) => {
  platform(`START ${m.id} (${Math.max(0, m.deadline - Date.now())} ms left)`);
  const started = Date.now();
  const context = {
    awsRequestId: randomUUID(),
    functionName,
    getRemainingTimeInMillis: () => Math.max(0, m.deadline - Date.now()),
  };
  handler(m.event, context).then(
    (result) => {
      platform(`END ${m.id} ok in ${Date.now() - started} ms`);
      send({ type: 'result', id: m.id, ok: true, result: result ?? null });
    },
    (err: unknown) => {
      platform(`END ${m.id} error in ${Date.now() - started} ms: ${err instanceof Error ? err.message : String(err)}`);
      send({
        type: 'result',
        id: m.id,
        ok: false,
        error: { name: err instanceof Error ? err.name : 'Error', message: err instanceof Error ? err.message : String(err) },
      });
    },
  );
});
// The parent going away ends the sandbox too.
process.on('disconnect', () => process.exit(0));
platform(`INIT ${modulePath} in ${Math.round(process.uptime() * 1000)} ms`);
send({ type: 'ready' });
