import { InvalidEventError, parseInboundEvent } from '../../../rollout/inbound.js';
import { ROLLOUT_SIGNAL_TYPES } from '../../../topology.js';
import { errorMessage } from '../../../log.js';
import type { CommandSpec } from '../command-spec.js';
import { run, TARGET_OPTIONS, type ClientOpts } from '../client-options.js';
import { UsageError } from '../errors.js';
import { int } from '../parsers.js';

/** `rollout events`: rollout signals, to a node or to the deployed bus. */
export const eventsCommand: CommandSpec = {
  name: 'events',
  description: 'Rollout signals (the StreamingPromoter acts on them at once)',
  commands: [
    {
      name: 'publish',
      description: 'Send a rollout signal: to a node (POST /events), or with --event-bus to the deployed EventBridge bus',
      options: [
        { flags: '--type <type>', description: `one of ${ROLLOUT_SIGNAL_TYPES.join(', ')}`, required: true },
        { flags: '--rollout <id>', description: 'the rollout (rolloutId)' },
        { flags: '--stage <index|name>', description: 'metrics: the stage' },
        { flags: '--requests <n>', description: 'metrics: requests so far in the stage (cumulative)', parser: int('--requests') },
        { flags: '--errors <n>', description: 'metrics: errors so far in the stage (cumulative)', parser: int('--errors') },
        { flags: '--p99-ms <ms>', description: 'metrics: p99 latency', parser: (v) => Number(v) },
        { flags: '--alarm <name>', description: 'alarm_changed: the alarm' },
        { flags: '--state <OK|ALARM|INSUFFICIENT_DATA>', description: 'alarm_changed: its state' },
        { flags: '--data <json>', description: 'further fields of the event, as JSON' },
        {
          flags: '--signer <reporter>',
          description: 'sign the signal as this reporter (Rollout-Signature) instead of sending a token; the secret from ROLLOUT_SIGNING_SECRET',
        },
        {
          flags: '--event-bus <name>',
          description: 'publish to this EventBridge bus (region and credentials from the AWS chain) instead of a node',
          env: 'ROLLOUT_EVENT_BUS',
        },
        ...TARGET_OPTIONS,
      ],
      action: async (
        o: ClientOpts & {
          type: string;
          rollout?: string;
          stage?: string;
          requests?: number;
          errors?: number;
          p99Ms?: number;
          alarm?: string;
          state?: string;
          data?: string;
          eventBus?: string;
          signer?: string;
        },
      ) => {
        let extra: Record<string, unknown> = {};
        if (o.data) {
          try {
            extra = JSON.parse(o.data) as Record<string, unknown>;
          } catch (err) {
            throw new UsageError(`--data is not JSON: ${errorMessage(err)}`);
          }
        }
        const now = new Date().toISOString();
        const fields: Record<string, unknown> = {
          ...(o.rollout ? { rolloutId: o.rollout } : {}),
          ...(o.stage !== undefined ? { stage: /^\d+$/.test(o.stage) ? Number(o.stage) : o.stage } : {}),
          ...(o.requests !== undefined ? { requests: o.requests } : {}),
          ...(o.errors !== undefined ? { errors: o.errors } : {}),
          ...(o.p99Ms !== undefined ? { p99LatencyMs: o.p99Ms } : {}),
          ...(o.alarm ? { alarm: o.alarm } : {}),
          ...(o.state ? { state: o.state } : {}),
          ...(o.type === 'rollout.metrics_reported' ? { observedAt: now } : {}),
          ...(o.type === 'rollout.alarm_changed' ? { changedAt: now } : {}),
          ...extra,
        };
        // Checked here too, so a bad event is refused before it leaves (the bus would only dead-letter it).
        const event = { type: o.type, ...fields };
        try {
          parseInboundEvent(event);
        } catch (err) {
          if (err instanceof InvalidEventError) throw new UsageError(err.message);
          throw err;
        }
        if (o.eventBus) {
          const { type, ...detail } = event;
          const { EventBridgeClient, PutEventsCommand } = await import('@aws-sdk/client-eventbridge');
          const res = await new EventBridgeClient({}).send(
            new PutEventsCommand({ Entries: [{ EventBusName: o.eventBus, Source: 'rollout.cli', DetailType: type, Detail: JSON.stringify(detail) }] }),
          );
          if (res.FailedEntryCount)
            throw new Error(`EventBridge refused the event: ${res.Entries?.[0]?.ErrorCode ?? ''} ${res.Entries?.[0]?.ErrorMessage ?? ''}`);
          process.stdout.write(
            o.json
              ? `${JSON.stringify({ eventId: res.Entries?.[0]?.EventId })}\n`
              : `published ${type} to ${o.eventBus} (${res.Entries?.[0]?.EventId ?? ''})\n`,
          );
          return;
        }
        let sign: { reporter: string; secret: string } | undefined;
        if (o.signer) {
          const secret = process.env.ROLLOUT_SIGNING_SECRET;
          if (!secret) throw new UsageError("--signer needs the reporter's secret in ROLLOUT_SIGNING_SECRET");
          sign = { reporter: o.signer, secret };
        }
        await run(
          o,
          'POST',
          '/events',
          event,
          (r) => {
            const x = r as { stored: string; evaluated: boolean; actions: { transition: string; applied: boolean }[] };
            const acts = x.actions.filter((a) => a.applied).map((a) => a.transition);
            return `accepted (${x.stored})${x.evaluated ? `; evaluated${acts.length ? `: ${acts.join(', ')}` : ', no change'}` : '; this node does not lead: the leader evaluates it within one tick'}`;
          },
          sign,
        );
      },
    },
  ],
};
