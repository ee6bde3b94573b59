import type { CommandSpec } from '../command-spec.js';
import { readJsonFile, table } from '../io.js';

/** `rollout spec`: rollout specs and run requests, checked on this machine before they are sent. */
export const specCommand: CommandSpec = {
  name: 'spec',
  description: 'Rollout specs and run requests, checked before they are sent',
  commands: [
    {
      name: 'schema',
      description: 'Print the JSON Schema (draft 2020-12) of a rollout spec, or of a run request (POST /runs): for editors and CI',
      options: [{ flags: '--kind <kind>', description: 'which', choices: ['rollout', 'run'], default: 'rollout' }],
      action: async (o: { kind: 'rollout' | 'run' }) => {
        // Loaded on use, as the node's commands are: the worker's bundle of this command stays lean.
        const schema =
          o.kind === 'run'
            ? (await import('../../../api/handler.js')).runRequestJsonSchema()
            : (await import('../../../rollout/spec.js')).rolloutSpecJsonSchema();
        process.stdout.write(`${JSON.stringify(schema, null, 2)}\n`);
      },
    },
    {
      name: 'check',
      description: 'Check a rollout spec as the API would, and print the stages it expands to (exit 2 naming each bad field)',
      options: [{ flags: '--file <spec.json>', description: 'the spec', required: true }],
      action: async (o: { file: string }) => {
        const { parseRolloutSpec, stageProviders } = await import('../../../rollout/spec.js');
        const spec = parseRolloutSpec(readJsonFile(o.file));
        const wide = new Set(spec.rolloutGates?.providers);
        const gates = (g: (typeof spec.stages)[number]['gates'], i: number) =>
          [
            g.maxErrorRate !== undefined ? `errors ≤ ${g.maxErrorRate * 100}%` : '',
            g.maxP99LatencyMs !== undefined ? `p99 ≤ ${g.maxP99LatencyMs} ms` : '',
            g.minRequests ? `≥ ${g.minRequests} requests` : '',
            ...g.alarms.map((a) => `alarm ${a}`),
            ...stageProviders(spec, i).map((p) => `${p.type} ${p.name}${wide.has(p) ? ' (rollout-wide)' : ''}`),
          ]
            .filter(Boolean)
            .join(', ') || '-';
        process.stdout.write(
          `${spec.target.service} ${spec.target.version}: ${spec.stages.length} stages\n${table(
            spec.stages.map((st, i) => ({ stage: st.name, percent: st.percent, bake: `${st.bakeSeconds}s`, gates: gates(st.gates, i) })),
            ['stage', 'percent', 'bake', 'gates'],
          )}\n`,
        );
      },
    },
  ],
};
