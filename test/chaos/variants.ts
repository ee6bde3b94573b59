/**
 * Deliberately broken variants of the product, for proving that the chaos
 * checker (and the explorer) can fail. None of this is in the product: the
 * harness starts each process with a module-load hook (variant-hooks.mjs)
 * that applies a variant's edits to the named source files as they load, or
 * rewrites the proxy's configuration it generates itself. An edit whose text
 * is no longer found fails the load loudly, so a variant cannot silently
 * become a no-op when the code moves on.
 */

export interface SourceEdit {
  /** Path from the project root. */
  readonly file: string;
  readonly find: string;
  readonly replace: string;
  /**
   * The text stands in several migrations (a function redefined by a later
   * one): the edit goes to its last occurrence, the definition in force.
   */
  readonly last?: true;
}

export interface Variant {
  readonly name: string;
  readonly description: string;
  /** The invariant the checker should report. */
  readonly breaks: string;
  readonly edits: readonly SourceEdit[];
  /** Also switched on over the AWS topology (its edits include the DynamoDB adapters'). */
  readonly aws?: boolean;
  /** Rewrites nginx.conf as generated for the cluster. */
  readonly nginx?: (conf: string) => string;
}

export const VARIANTS: Record<string, Variant> = {
  'fence-holder-only': {
    name: 'fence-holder-only',
    aws: true,
    description: 'the fence checks the lease holder, not the epoch',
    breaks: 'write-under-current-epoch',
    edits: [
      { file: 'shared/lease/fencing.ts', find: 'view.holder === token.holder && view.epoch === token.epoch', replace: 'view.holder === token.holder' },
      {
        file: 'shared/adapters/postgres/fence.ts',
        find: 'AND epoch = ${p(token.epoch)} FOR SHARE',
        replace: 'AND ${p(token.epoch)}::bigint IS NOT NULL FOR SHARE',
      },
      {
        file: 'shared/adapters/postgres/migrations/functions/rollout_apply.sql',
        find: 'IF l.holder IS DISTINCT FROM p_holder OR l.epoch <> p_epoch THEN',
        replace: 'IF l.holder IS DISTINCT FROM p_holder THEN',
      },
      // DynamoDB: the fence's ConditionCheck on the lease item compares the holder alone.
      {
        file: 'shared/adapters/dynamodb/fence.ts',
        find: "ConditionExpression: 'holder = :fenceHolder AND epoch = :fenceEpoch',",
        replace: "ConditionExpression: 'holder = :fenceHolder',",
      },
      {
        file: 'shared/adapters/dynamodb/fence.ts',
        find: "ExpressionAttributeValues: { ':fenceHolder': token.holder, ':fenceEpoch': token.epoch },",
        replace: "ExpressionAttributeValues: { ':fenceHolder': token.holder },",
      },
    ],
  },
  'promote-if-not-promoted': {
    name: 'promote-if-not-promoted',
    aws: true,
    description: "promotion conditioned on phase != 'promoted', not on the exact state evaluated",
    breaks: 'no-promotion-after-rollback',
    edits: [
      {
        file: 'shared/adapters/postgres/migrations/functions/rollout_apply.sql',
        find: "WHERE id = p->>'rolloutId' AND version = (x->>'version')::bigint AND state = x->>'state' AND attempt = (x->>'attempt')::int;",
        replace: "WHERE id = p->>'rolloutId';",
      },
      {
        file: 'shared/adapters/postgres/migrations/functions/rollout_apply.sql',
        find: "AND stage_index = (c->>'index')::int AND phase = c->>'expect';",
        replace: "AND stage_index = (c->>'index')::int AND phase <> 'promoted';",
      },
      // DynamoDB: the rollout row is written whatever it became since it was read (its values stay used, as
      // DynamoDB requires), and a stage changes unless it is promoted.
      {
        file: 'shared/adapters/dynamodb/rollout-transitions.ts',
        find: "ConditionExpression: 'version = :v AND #state = :s AND attempt = :a',",
        replace: "ConditionExpression: 'attribute_exists(pk) OR (version = :v AND #state = :s AND attempt = :a)',",
      },
      {
        file: 'shared/adapters/dynamodb/rollout-transitions.ts',
        find: "ConditionExpression: 'phase = :expectPhase',",
        replace: "ConditionExpression: 'phase <> :promotedPhase AND (phase = :expectPhase OR attribute_exists(phase))',",
      },
      {
        file: 'shared/adapters/dynamodb/rollout-transitions.ts',
        find: "ExpressionAttributeValues: { ':expectPhase': change.expect,",
        replace: "ExpressionAttributeValues: { ':expectPhase': change.expect, ':promotedPhase': 'promoted',",
      },
    ],
  },
  'nginx-bench-on-503': {
    name: 'nginx-bench-on-503',
    description: "the proxy's read pool counts a 503 as a dead node and has no never-benched backups",
    breaks: 'reads-answer',
    edits: [],
    nginx: (conf) => {
      const out = conf
        .split('\n')
        .filter((l) => !/server 127\.0\.0\.1:\d+ backup max_fails=0;/.test(l))
        .join('\n')
        .replace(/proxy_read_timeout (\S+);\n(\s+)proxy_next_upstream error timeout;/, 'proxy_read_timeout $1;\n$2proxy_next_upstream error timeout http_503;');
      if (out === conf || !out.includes('error timeout http_503;\n      add_header X-Controller-Mode "read-distributed"'))
        throw new Error('variant nginx-bench-on-503: the read location was not found in nginx.conf');
      return out;
    },
  },
  'no-heartbeat-of-held': {
    name: 'no-heartbeat-of-held',
    description: 'a worker heartbeats only the items it is executing, not those it holds waiting',
    breaks: 'live-worker-keeps-items',
    edits: [
      {
        file: 'shared/ledger/worker/heartbeat.ts',
        find: 'for (const h of [...all.backlog, ...all.executing.values(), ...all.outcomes.map((o) => o.h)]) byId.set(h.itemId, h);',
        replace: 'for (const h of [...all.executing.values()]) byId.set(h.itemId, h);',
      },
    ],
  },
  'no-dead-letter-pass': {
    name: 'no-dead-letter-pass',
    description: "the node's coordinator never fails items given back maxReceiveCount times: poison stays Pending, undelivered, forever",
    breaks: 'runs-finish',
    edits: [
      {
        file: 'shared/runtimes/node/node.ts',
        find: 'run: () => this.coordinators.failDeadLetters().then(() => this.coordinators.scan()) },',
        replace: 'run: () => this.coordinators.scan() },',
      },
    ],
  },
  'resign-deletes-row': {
    name: 'resign-deletes-row',
    description: 'resigning deletes the lease row, so the next holder starts again at epoch 0',
    breaks: 'lease-epoch-monotonic',
    edits: [
      {
        file: 'shared/adapters/postgres/lease-store.ts',
        find: '        : // steal, renew, release: only over the exact prior row\n          await this.sql.query(',
        replace:
          "        : next.holder === null\n          ? await this.sql.query('DELETE FROM leases WHERE name = $1 AND version = $2 RETURNING name', [next.name, expected.version])\n          : await this.sql.query(",
      },
    ],
  },
  'actuate-before-commit': {
    name: 'actuate-before-commit',
    description:
      "a transition's traffic is carried out to its targets before the transition is committed, so a commit that is lost or refused leaves the target ahead",
    breaks: 'actuation-never-ahead',
    edits: [
      // Pauses are left out: they move no traffic, and a pause for drift runs inside a convergence of the same rollout.
      {
        file: 'shared/rollout/engine.ts',
        find: '      const plan = planTransition(view, t, { now: this.clock.now(), token, actor });\n      const applied = await this.store.apply(token, plan);',
        replace:
          "      const plan = planTransition(view, t, { now: this.clock.now(), token, actor });\n      if (t.kind !== 'pause') await this.actuate(viewAfter(view, plan), token);\n      const applied = await this.store.apply(token, plan);",
      },
      {
        file: 'shared/rollout/engine.ts',
        find: '      const w = await this.store.recordMetricsAndApply!(token, plan, reading, held);',
        replace:
          '      await this.actuate(viewAfter(view, plan), token);\n      const w = await this.store.recordMetricsAndApply!(token, plan, reading, held);',
      },
    ],
  },
  'actuate-without-revision': {
    name: 'actuate-without-revision',
    description:
      "the write to a target is not conditioned on what it was decided on. On a Lambda alias that is UpdateAlias without the RevisionId (the explorer models that form); the local topology has no alias, so here it is the nginx actuator's analogue: the stamp is not read again before the file is replaced, and a deposed leader's late write overwrites a newer leader's",
    breaks: 'actuation-epoch-monotonic',
    edits: [
      {
        file: 'shared/adapters/actuators/nginx/actuator.ts',
        find: '    const why = outranks(found, stamp);\n    if (why) throw new TargetMovedError(this.target, why);',
        replace: '    void found;',
      },
    ],
  },
  'promote-on-failing-judgement': {
    name: 'promote-on-failing-judgement',
    description:
      'the evaluator leaves a judged gate whose newest reading failed out of its verdict: the reading is stored as a failure, and instead of rolling back the stage promotes on its other gates',
    breaks: 'promotion-judged-pass',
    edits: [
      {
        file: 'shared/rollout/evaluate.ts',
        find: 'const providers = providerVerdict(stageProviders(rollout.spec, active.index), counted.tallies,',
        replace:
          "const providers = providerVerdict(stageProviders(rollout.spec, active.index).filter((g) => !('judge' in g && g.judge && currentTally(view.gates, active.index, g.name, rollout.lastProgressAt)?.last.outcome === 'fail')), counted.tallies,",
      },
    ],
  },
};

export function variantNamed(name: string): Variant {
  const v = VARIANTS[name];
  if (!v) throw new Error(`unknown variant "${name}": one of ${Object.keys(VARIANTS).join(', ')}`);
  return v;
}
