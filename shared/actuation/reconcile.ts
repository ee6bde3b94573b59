import type { Clock } from '../clock.js';
import { canonicalJson } from '../canonical-json.js';
import type { LeaseToken } from '../lease/record.js';
import { errorMessage, silentLogger, type Logger } from '../log.js';
import { trafficOf } from '../rollout/assignment.js';
import type { RolloutView } from '../rollout/model.js';
import { isJudged, type RolloutSpec } from '../rollout/spec.js';
import type { ProviderGate } from '../rollout/gate-spec.js';
import type { RolloutStore } from '../rollout/store.js';
import { movesTargets, type PauseForDrift, type TrafficActuation } from '../rollout/engine.js';
import { isTerminal } from '../rollout/transitions.js';
import { TargetMovedError, TargetRefusedError, type Actuator, type Desired, type Observed, type Stamp } from './port.js';
import type { ActuationRecord } from '../rollout/actuation-record.js';
import { dimensionStrings, postRolloutHooks, type WebhookGate } from '../rollout/gate-spec.js';
import { contextOf, type GateProvider } from '../rollout/gate-reader.js';
import type { ProviderResult } from '../rollout/gates.js';
import { failSpan, inSpan, SPAN } from '../tracing.js';

/**
 * Convergence of a rollout's targets to its committed traffic: the one place
 * that decides whether to write, what is drift and who may overwrite whom.
 * Actuators only read and write (port.ts).
 */

/** What a rollout's committed state asks of every target. */
export function desiredOf(view: Pick<RolloutView, 'rollout' | 'stages'>): Desired {
  const t = trafficOf(view);
  const { stableVersion } = view.rollout.spec.target;
  return {
    rolloutId: view.rollout.id,
    attempt: t.attempt,
    stage: t.stage?.index ?? null,
    percent: t.final ? 100 : t.percent,
    final: t.final,
    newVersion: view.rollout.spec.target.version,
    version: view.rollout.version,
    ...(stableVersion !== undefined && judgesBaselineByVersion(view.rollout.spec) ? { baselineVersion: stableVersion } : {}),
  };
}

/**
 * Whether a judged gate of the spec (a dry-run one too, from any stage or rollout-wide) names its
 * cohorts by `{{version}}`: it then reads spec.target.stableVersion as the baseline, whatever the
 * target serves. A threshold gate's `{{version}}`, if any, is the canary's alone.
 */
export function judgesBaselineByVersion(spec: Pick<RolloutSpec, 'stages' | 'rolloutGates'>): boolean {
  const gates = [...spec.stages.flatMap((s) => s.gates.providers ?? []), ...(spec.rolloutGates?.providers ?? [])];
  const templates = (g: ProviderGate): (string | undefined)[] => {
    if (g.type === 'prometheus') return [g.query, g.requestsQuery];
    if (g.type === 'cloudwatchMetric') return [g.metric, g.requestsMetric].flatMap((m) => (m ? Object.values(m.dimensions).flatMap(dimensionStrings) : []));
    return [];
  };
  return gates.some((g) => isJudged(g) && templates(g).some((t) => t?.includes('{{version}}')));
}

export type Verdict =
  /** The target carries what is asked, under our stamp. */
  | { readonly kind: 'converged' }
  | { readonly kind: 'write' }
  /** A leader of a higher epoch stamped it, or a newer state of this rollout is on it: not ours to write (that writer converges it). */
  | { readonly kind: 'superseded'; readonly epoch: number }
  /** Someone else changed it: record, pause, never fight. */
  | { readonly kind: 'drift'; readonly reason: string }
  /** Drift already recorded and paused for; nothing is written until a person acts on the rollout. */
  | { readonly kind: 'held' }
  /** The rollout has ended and the target is another's (or was never ours): nothing to do, ever. */
  | { readonly kind: 'released'; readonly reason: string };

/** The share on the new version as a target carries it: all of it once finalised. */
const shareOf = (o: { percent: number; final: boolean }) => (o.final ? 100 : o.percent);

/**
 * Whether to write `desired` to a target found as `observed`, for a leader of
 * `epoch` whose last record of the target is `record`, on a rollout now at
 * `version` and `ended` or not.
 */
export function decide(
  desired: Desired,
  observed: Observed,
  epoch: number,
  record: ActuationRecord | null,
  rollout: { version: number; ended: boolean },
): Verdict {
  const stamp = observed.stamp;
  if (stamp && stamp.epoch > epoch) return { kind: 'superseded', epoch: stamp.epoch };
  // Our own newer write (another process of this leader, or this one converging an older reading): never undone.
  if (stamp && stamp.rolloutId === desired.rolloutId && stamp.version !== undefined && stamp.version > desired.version)
    return { kind: 'superseded', epoch: stamp.epoch };
  // A person acted on the rollout after our pause for drift (resume, abort, promote-full): ours again.
  const adopted = record?.state === 'drift' && record.driftVersion !== null && rollout.version > record.driftVersion;
  if (record?.state === 'drift' && !adopted) return { kind: 'held' };
  const ours = stamp !== null && stamp.rolloutId === desired.rolloutId;
  // Converged under our own epoch only: what a deposed leader stamped is stamped again, so the bar its other late writes meet is ours.
  if (
    ours &&
    stamp.epoch === epoch &&
    carries(stamp, desired) &&
    !observed.foreignSplit &&
    shareOf(observed) === shareOf(stamp) &&
    observed.final === stamp.final
  )
    return { kind: 'converged' };
  if (adopted) return { kind: 'write' };
  if (!ours) {
    // Our stamp was there and is gone: someone else rewrote the target (an operator resetting it after a rollout, say).
    if (record?.stamp) {
      if (rollout.ended) return { kind: 'released', reason: `our stamp is gone: ${observed.detail}` };
      return { kind: 'drift', reason: `our stamp is gone (${stamp ? `rollout ${stamp.rolloutId}'s is there` : 'none is there'}): ${observed.detail}` };
    }
    // At rest: nothing split, nothing on the new side. Anything else another writer put there.
    const atRest = !observed.foreignSplit && shareOf(observed) === 0;
    // An ended rollout leaves a target another rollout holds, or one someone else split. One at rest it still
    // writes, never written or not: its end (0, or finalised) stamped there also outranks a deposed leader's
    // first write still in flight, which would otherwise land on a target no one looks at again.
    if (rollout.ended && (stamp || !atRest))
      return { kind: 'released', reason: stamp ? `held by rollout ${stamp.rolloutId}` : `not at rest, and never ours: ${observed.detail}` };
    if (observed.foreignSplit) return { kind: 'drift', reason: `it carries a split that is not this rollout's: ${observed.foreignSplit}` };
    if (!atRest)
      return {
        kind: 'drift',
        reason: `it carries ${shareOf(observed)}% on the new side ${stamp ? `under rollout ${stamp.rolloutId}'s stamp` : 'and no stamp of ours'}: ${observed.detail}`,
      };
    // About to be moved for the first time: its stable side is the baseline its judged gates read, or they would judge the canary against a version no one runs.
    if (!rollout.ended && desired.baselineVersion !== undefined && observed.servedVersion !== undefined && observed.servedVersion !== desired.baselineVersion)
      return {
        kind: 'drift',
        reason:
          `it serves version ${observed.servedVersion}, but the rollout's stableVersion is ${desired.baselineVersion}, the baseline its judged gates read by {{version}}; ` +
          `nothing was moved. Put the target back on ${desired.baselineVersion} and resume, or abort and create the rollout again with stableVersion ${observed.servedVersion}: ${observed.detail}`,
      };
    return { kind: 'write' };
  }
  if (observed.foreignSplit) return { kind: 'drift', reason: `it carries a split that is not this rollout's: ${observed.foreignSplit}` };
  if (shareOf(observed) !== shareOf(stamp) || observed.final !== stamp.final) {
    return {
      kind: 'drift',
      reason: `its weights were changed by someone else: we wrote ${shareOf(stamp)}%${stamp.final ? ' (final)' : ''}, found ${shareOf(observed)}%${observed.final ? ' (final)' : ''}: ${observed.detail}`,
    };
  }
  return { kind: 'write' };
}

function carries(stamp: Stamp, d: Desired): boolean {
  return stamp.attempt === d.attempt && stamp.stage === d.stage && shareOf(stamp) === shareOf(d) && stamp.final === d.final;
}

export interface TargetOutcome {
  readonly target: string;
  readonly verdict: Verdict['kind'] | 'failed' | 'unknown-target';
  /** A write was made and read back carrying what was asked. */
  readonly wrote: boolean;
  readonly record: ActuationRecord | null;
}

/** Re-reads after a conditioned write found the target moved, before giving up until the next tick. */
const MOVED_RETRIES = 3;

/**
 * How long an ended rollout's targets are still read by every tick once they
 * carry its end. A deposed leader's write that passed its checks before the
 * takeover can land after the end was written (nginx and ELBv2 cannot refuse
 * it); within this window the next tick finds it and writes the end again.
 */
export const SETTLE_AFTER_MS = 120_000;

export class Actuation implements TrafficActuation {
  private readonly chains = new Map<string, Promise<unknown>>();

  constructor(
    private readonly store: RolloutStore,
    private readonly actuators: ReadonlyMap<string, Actuator>,
    private readonly clock: Clock,
    private readonly logger: Logger = silentLogger,
    /** Sends post-rollout hooks (the webhook gate provider). */
    private readonly hooks?: GateProvider<WebhookGate>,
  ) {}

  /**
   * Converge every target of the rollout to `view` (a committed state).
   * Calls for one rollout run one after another in this process, so the
   * write made after a transition and a tick's reconciliation never cross.
   * FencedError propagates (we no longer lead); a target's own failure is
   * recorded and retried at the next tick.
   */
  converge(view: RolloutView, token: LeaseToken, pause: PauseForDrift): Promise<TargetOutcome[]> {
    if (!movesTargets(view)) return Promise.resolve([]);
    const id = view.rollout.id;
    const prior = this.chains.get(id) ?? Promise.resolve();
    const run = prior.catch(() => undefined).then(() => this.convergeNow(view, token, pause));
    this.chains.set(id, run);
    void run
      .finally(() => {
        if (this.chains.get(id) === run) this.chains.delete(id);
      })
      .catch(() => undefined);
    return run;
  }

  private async convergeNow(view: RolloutView, token: LeaseToken, pause: PauseForDrift): Promise<TargetOutcome[]> {
    const records = new Map((await this.store.actuations(view.rollout.id)).map((r) => [r.target, r]));
    const out: TargetOutcome[] = [];
    const desired = desiredOf(view);
    for (const target of view.rollout.spec.actuators ?? []) {
      const kind = this.actuators.get(target)?.kind ?? 'unknown';
      out.push(await this.traced(desired, target, kind, token, () => this.convergeTarget(view, target, records.get(target) ?? null, token, pause)));
    }
    for (const hook of postRolloutHooks(view.rollout.spec.hooks)) {
      const name = `${POST_ROLLOUT}${hook.name}`;
      out.push(await this.traced(desired, name, 'postRolloutHook', token, () => this.deliverHook(view, hook, name, records.get(name) ?? null, token)));
    }
    return out;
  }

  /** One target's convergence in a `rollout.actuate` span (docs/operating/observability.md#operating: traces): what was asked, and the verdict. */
  private traced(desired: Desired, target: string, kind: string, token: LeaseToken, converge: () => Promise<TargetOutcome>): Promise<TargetOutcome> {
    const attributes = {
      'rollout.id': desired.rolloutId,
      'rollout.attempt': desired.attempt,
      'rollout.stage.index': desired.stage ?? undefined,
      'rollout.percent': desired.percent,
      'rollout.final': desired.final,
      'rollout.target': target,
      'rollout.actuator.kind': kind,
      'lease.epoch': token.epoch,
    };
    return inSpan(SPAN.actuate, attributes, async (span) => {
      const outcome = await converge();
      span.setAttributes({ 'rollout.actuation.verdict': outcome.verdict, 'rollout.actuation.wrote': outcome.wrote });
      if (outcome.verdict === 'failed' || outcome.verdict === 'unknown-target') failSpan(span, outcome.record?.reason ?? `${target}: ${outcome.verdict}`);
      return outcome;
    });
  }

  /**
   * A post-rollout hook: registered (a record not settled) while the rollout
   * runs, so that once it ends a crash between the end's commit and the hook
   * cannot lose it, since every tick visits unsettled records. Once ended it is
   * sent by the leader, the record written first (fenced: a deposed leader
   * sends nothing), then again with the answer: a 2xx settles it; a 4xx
   * counts as failed and anything else as inconclusive, each tick after the
   * hook's interval, until either count passes its limit and we give up
   * (recorded, logged). At least once: a receiver deduplicates on the
   * idempotency key.
   */
  private async deliverHook(view: RolloutView, hook: WebhookGate, target: string, prior: ActuationRecord | null, token: LeaseToken): Promise<TargetOutcome> {
    const { rollout } = view;
    const now = this.clock.now();
    const save = async (r: Pick<ActuationRecord, 'state' | 'reason' | 'settled'> & Partial<ActuationRecord>): Promise<ActuationRecord> => {
      const record: ActuationRecord = {
        rolloutId: rollout.id,
        target,
        kind: 'postRolloutHook',
        attempt: rollout.attempt,
        stage: null,
        percent: 0,
        final: rollout.state === 'completed',
        epoch: token.epoch,
        stamp: null,
        appliedAt: null,
        driftVersion: null,
        observed: prior?.observed ?? null,
        ...(prior?.tries ? { tries: prior.tries } : {}),
        ...r,
        updatedAt: now,
      };
      if (prior && sameRecord(prior, record)) return prior;
      await this.store.recordActuation(token, record);
      return record;
    };
    if (prior?.settled) return { target, verdict: 'converged', wrote: false, record: prior };
    if (!isTerminal(rollout.state))
      return { target, verdict: 'held', wrote: false, record: await save({ state: 'pending', reason: 'sent once the rollout has ended', settled: false }) };
    const tries = prior?.tries ?? { failed: 0, inconclusive: 0 };
    if (tries.failed + tries.inconclusive > 0 && prior && now - prior.updatedAt < hook.intervalSeconds * 1000)
      return { target, verdict: 'held', wrote: false, record: prior };
    if (!this.hooks)
      return {
        target,
        verdict: 'failed',
        wrote: false,
        record: await save({ state: 'failed', reason: 'no hook sender is configured in this process', settled: false }),
      };
    await save({ state: 'pending', reason: `sending (try ${tries.failed + tries.inconclusive + 1})`, settled: false });
    const reached = lastStageReached(view);
    const ctx = { ...contextOf(view, reached, token.epoch), outcome: rollout.state as 'completed' | 'rolled_back' | 'aborted' };
    const [result] = await this.hooks
      .read([hook], { now, signal: new AbortController().signal, contexts: [ctx] })
      .catch((err: unknown): ProviderResult[] => [{ kind: 'error', message: errorMessage(err), answer: '' }]);
    const answer = result ? (result.kind === 'error' ? result.message : result.answer).slice(0, 300) : 'no answer';
    const observed = { percent: 0, final: rollout.state === 'completed', detail: answer };
    if (result?.kind === 'http' && result.status >= 200 && result.status < 300) {
      return {
        target,
        verdict: 'write',
        wrote: true,
        record: await save({ state: 'converged', reason: null, observed, appliedAt: this.clock.now(), settled: true, tries }),
      };
    }
    const failed = result?.kind === 'http' && result.status >= 400 && result.status < 500;
    const next = { failed: tries.failed + (failed ? 1 : 0), inconclusive: tries.inconclusive + (failed ? 0 : 1) };
    const gaveUp = next.failed > hook.failureLimit || next.inconclusive > hook.inconclusiveLimit;
    const reason = `post-rollout hook ${hook.name}: ${answer}${gaveUp ? ` (given up after ${next.failed + next.inconclusive} tries: failureLimit ${hook.failureLimit}, inconclusiveLimit ${hook.inconclusiveLimit})` : ''}`;
    this.logger.warn(gaveUp ? 'post-rollout hook given up' : 'post-rollout hook not delivered; retried', { rolloutId: rollout.id, hook: hook.name, answer });
    return { target, verdict: 'failed', wrote: false, record: await save({ state: 'failed', reason, observed, settled: gaveUp, tries: next }) };
  }

  private async convergeTarget(
    view: RolloutView,
    target: string,
    prior: ActuationRecord | null,
    token: LeaseToken,
    pause: PauseForDrift,
  ): Promise<TargetOutcome> {
    const desired = desiredOf(view);
    const ended = isTerminal(view.rollout.state);
    const actuator = this.actuators.get(target);
    const base = {
      rolloutId: desired.rolloutId,
      target,
      attempt: desired.attempt,
      stage: desired.stage,
      percent: desired.percent,
      final: desired.final,
      epoch: token.epoch,
      stamp: prior?.stamp ?? null,
      appliedAt: prior?.appliedAt ?? null,
      driftVersion: prior?.driftVersion ?? null,
      observed: prior?.observed ?? null,
    };
    const save = async (r: Pick<ActuationRecord, 'state' | 'reason' | 'settled'> & Partial<ActuationRecord>): Promise<ActuationRecord> => {
      const record: ActuationRecord = { ...base, kind: actuator?.kind ?? prior?.kind ?? 'nginx', ...r, updatedAt: this.clock.now() };
      // Unchanged but for the time: not worth a write on every tick.
      if (prior && sameRecord(prior, record)) return prior;
      await this.store.recordActuation(token, record);
      return record;
    };
    if (!actuator) {
      const reason = `target ${target} is not configured here: the operator's targets name no such target`;
      this.logger.warn('actuation target unknown', { rolloutId: desired.rolloutId, target });
      return { target, verdict: 'unknown-target', wrote: false, record: await save({ state: 'failed', reason, settled: false }) };
    }
    const observedOf = (o: Observed) => ({ percent: o.percent, final: o.final, detail: o.detail });
    let wrote = false;
    for (let attempt = 0; ; attempt++) {
      let observed: Observed;
      try {
        observed = await actuator.read(desired.newVersion);
      } catch (err) {
        return {
          target,
          verdict: 'failed',
          wrote,
          record: await save({ state: 'failed', reason: `${target}: read failed: ${errorMessage(err)}`, settled: false }),
        };
      }
      const verdict = decide(desired, observed, token.epoch, prior, { version: view.rollout.version, ended });
      switch (verdict.kind) {
        case 'converged': {
          const appliedAt = base.appliedAt ?? this.clock.now();
          return {
            target,
            verdict: 'converged',
            wrote,
            record: await save({
              state: 'converged',
              reason: null,
              observed: observedOf(observed),
              stamp: observed.stamp,
              appliedAt,
              driftVersion: null,
              settled: ended && this.clock.now() - appliedAt >= SETTLE_AFTER_MS,
            }),
          };
        }
        case 'superseded':
          this.logger.info('actuation target stamped by a newer leader; left to it', {
            rolloutId: desired.rolloutId,
            target,
            stampEpoch: verdict.epoch,
            epoch: token.epoch,
          });
          return { target, verdict: 'superseded', wrote, record: prior };
        case 'held':
          return { target, verdict: 'held', wrote, record: prior };
        case 'released':
          return {
            target,
            verdict: 'released',
            wrote,
            record: await save({ state: 'converged', reason: verdict.reason, observed: observedOf(observed), settled: true }),
          };
        case 'drift': {
          const reason = `actuation drift on ${target} (${actuator.kind}): ${verdict.reason}`;
          this.logger.warn('actuation drift', { rolloutId: desired.rolloutId, target, reason });
          // Paused first: a record of drift holds our writes back, which is safe only once the rollout cannot move on
          // (a crash in between leaves a paused rollout whose next reading finds the drift again and records it).
          const paused = ended ? null : await pause(desired.rolloutId, target, reason, token);
          const record = await save({ state: 'drift', reason, observed: observedOf(observed), driftVersion: paused ?? view.rollout.version, settled: ended });
          return { target, verdict: 'drift', wrote, record };
        }
        case 'write': {
          const stamp: Stamp = {
            rolloutId: desired.rolloutId,
            attempt: desired.attempt,
            stage: desired.stage,
            epoch: token.epoch,
            percent: desired.percent,
            final: desired.final,
            version: desired.version,
          };
          // Written first, fenced: a leader deposed by now writes nothing to the target, and a crash after the write leaves a record the next leader's tick finds.
          await save({ state: 'pending', reason: null, observed: observedOf(observed), settled: false });
          let after: Observed;
          try {
            after = await actuator.write(desired, stamp, observed);
          } catch (err) {
            if (err instanceof TargetMovedError && attempt < MOVED_RETRIES) continue;
            const state = err instanceof TargetRefusedError ? 'failed' : 'pending';
            this.logger.warn('actuation write failed', { rolloutId: desired.rolloutId, target, error: errorMessage(err) });
            return { target, verdict: 'failed', wrote, record: await save({ state, reason: errorMessage(err), settled: false }) };
          }
          wrote = true;
          const verified =
            after.stamp !== null &&
            after.stamp.rolloutId === stamp.rolloutId &&
            after.stamp.epoch === stamp.epoch &&
            carries(after.stamp, desired) &&
            shareOf(after) === shareOf(desired) &&
            after.final === desired.final;
          if (!verified) {
            const reason = `${target}: read back ${shareOf(after)}%${after.final ? ' (final)' : ''} after writing ${desired.percent}%: ${after.detail}`;
            return { target, verdict: 'failed', wrote, record: await save({ state: 'pending', reason, observed: observedOf(after), settled: false }) };
          }
          // Settled only after SETTLE_AFTER_MS of carrying the end: a tick reads it again until then.
          return {
            target,
            verdict: 'write',
            wrote,
            record: await save({
              state: 'converged',
              reason: null,
              observed: observedOf(after),
              stamp: after.stamp,
              appliedAt: this.clock.now(),
              driftVersion: null,
              settled: false,
            }),
          };
        }
      }
    }
  }
}

/** Where a post-rollout hook's delivery is recorded: beside the targets, as `post-rollout:<hook name>` (no target name has a colon). */
export const POST_ROLLOUT = 'post-rollout:';

/** The last stage the attempt reached: what a post-rollout hook says it ended on. */
function lastStageReached(view: RolloutView): number {
  let last = 0;
  for (const s of view.stages) if (s.phase !== 'pending') last = s.index;
  return last;
}

function sameRecord(a: ActuationRecord, b: ActuationRecord): boolean {
  const { updatedAt: _a, ...x } = a;
  const { updatedAt: _b, ...y } = b;
  return canonicalJson(x) === canonicalJson(y);
}
