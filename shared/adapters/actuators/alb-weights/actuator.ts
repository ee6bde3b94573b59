import {
  AddTagsCommand,
  DescribeListenersCommand,
  DescribeRulesCommand,
  DescribeTagsCommand,
  ModifyListenerCommand,
  ModifyRuleCommand,
  type Action,
  type ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import {
  outranks,
  parseStamp,
  sameReading,
  stampText,
  TargetMovedError,
  TargetRefusedError,
  type Actuator,
  type Desired,
  type Observed,
  type Stamp,
} from '../../../actuation/port.js';
import type { AlbWeightsTarget } from '../../../actuation/targets.js';

/**
 * A weighted `forward` action of an ALB listener rule (or of a listener's
 * default action) as an actuator: the stable and canary target groups'
 * weights carry the split, a tag on the rule or listener carries our stamp.
 *
 * ELBv2 cannot condition a write, so a write re-reads the target first and
 * refuses (TargetMovedError) when the target is no longer what the caller
 * decided on, or when its stamp carries a higher epoch than ours; what is
 * left is the window between that re-read and the write, which the read-back
 * shows the caller. Only the forward action is replaced: the rule's
 * conditions and any action before it (authentication) are kept.
 */

export const STAMP_TAG = 'rollout:stamp';
/** ELBv2's largest weight for one target group. */
export const MAX_WEIGHT = 999;

export interface Weights {
  readonly stable: number;
  readonly canary: number;
}

/**
 * The weights that carry `percent` on the canary group. Whole percents are
 * written out of 100 and tenths out of 1000 (both exact, and what a person
 * reading the console expects); hundredths take the ratio of two weights
 * within 1–999 nearest to the percent, which rounds back to it for all but
 * 40 of the 10,001 two-decimal percents (off by at most 0.09, e.g. 0.01 → 1
 * in 1000). A split below 100 % keeps at least 1 on each side: a stage in
 * force always sends the canary something, and only final sends it all.
 */
export function weightsFor(percent: number, final: boolean): Weights {
  if (final || percent === 100) return { stable: 0, canary: 100 };
  if (!Number.isFinite(percent) || percent < 0 || percent > 100) throw new RangeError(`a percent within 0–100, not ${percent}`);
  const hundredths = Math.round(percent * 100);
  if (hundredths === 0) return { stable: 100, canary: 0 };
  if (hundredths % 100 === 0) return { stable: 100 - hundredths / 100, canary: hundredths / 100 };
  if (hundredths % 10 === 0) return { stable: 1000 - hundredths / 10, canary: hundredths / 10 };
  const share = hundredths / 10_000;
  let best: Weights = { stable: MAX_WEIGHT, canary: 1 };
  let bestError = Infinity;
  for (let total = 2; total <= 2 * MAX_WEIGHT; total++) {
    const canary = Math.min(total - 1, Math.max(1, Math.round(share * total)));
    const stable = total - canary;
    if (canary > MAX_WEIGHT || stable > MAX_WEIGHT) continue;
    const error = Math.abs(canary / total - share);
    if (error < bestError) {
      best = { stable, canary };
      bestError = error;
    }
  }
  return best;
}

/** What ELBv2 answers when it refuses an action's content; it changes nothing then. */
const REFUSALS = new Set([
  'ValidationError',
  'TargetGroupNotFoundException',
  'IncompatibleProtocolsException',
  'InvalidConfigurationRequestException',
  'InvalidLoadBalancerActionException',
  'OperationNotPermittedException',
  'TooManyActionsException',
  'TooManyTargetGroupsException',
  'TargetGroupAssociationLimitException',
  'TooManyUniqueTargetGroupsPerLoadBalancerException',
]);

interface Reading {
  readonly actions: readonly Action[];
  /** The forward action, when there is one (a rule has at most one). */
  readonly forward: Action | undefined;
  readonly stable: number;
  readonly canary: number;
  /** Target groups the forward action lists besides ours, with their weights. */
  readonly others: readonly { readonly arn: string; readonly weight: number }[];
  readonly listed: { readonly stable: boolean; readonly canary: boolean };
  readonly stickySeconds: number | null;
  readonly tag: string | undefined;
}

export class AlbWeightsActuator implements Actuator {
  readonly kind = 'albWeights' as const;
  private readonly arn: string;
  private readonly where: string;

  constructor(
    readonly target: string,
    private readonly config: AlbWeightsTarget,
    private readonly client: ElasticLoadBalancingV2Client,
  ) {
    const arn = config.ruleArn ?? config.listenerArn;
    if (arn === undefined || (config.ruleArn !== undefined && config.listenerArn !== undefined))
      throw new Error(`${target}: give ruleArn or listenerArn, exactly one`);
    if (config.stableTargetGroupArn === config.canaryTargetGroupArn) throw new Error(`${target}: the stable and canary target groups must differ`);
    this.arn = arn;
    this.where = config.ruleArn !== undefined ? `rule …/${lastSegment(arn)}` : `listener …/${lastSegment(arn)} default action`;
  }

  // The canary target group is the new version: newVersion has no part in an ALB reading.
  async read(_newVersion: string): Promise<Observed> {
    return this.observe(await this.load());
  }

  async write(desired: Desired, stamp: Stamp, observed: Observed): Promise<Observed> {
    const now = await this.load();
    const current = this.observe(now);
    const why = outranks(current.stamp, stamp);
    if (why) throw new TargetMovedError(this.target, why);
    if (!sameReading(current, observed)) throw new TargetMovedError(this.target, `read as ${observed.detail}, now ${current.detail}`);
    if (now.forward === undefined) throw new TargetRefusedError(this.target, `${current.detail}: no forward action to weight`);

    const weights = weightsFor(desired.percent, desired.final);
    const forward: Action = {
      Type: 'forward',
      ...(now.forward.Order !== undefined ? { Order: now.forward.Order } : {}),
      ForwardConfig: {
        TargetGroups: [
          { TargetGroupArn: this.config.stableTargetGroupArn, Weight: weights.stable },
          { TargetGroupArn: this.config.canaryTargetGroupArn, Weight: weights.canary },
        ],
        TargetGroupStickinessConfig:
          this.config.stickinessSeconds !== undefined ? { Enabled: true, DurationSeconds: this.config.stickinessSeconds } : { Enabled: false },
      },
    };
    const actions = now.actions.map((a) => (a === now.forward ? forward : resendable(a)));
    try {
      if (this.config.ruleArn !== undefined) await this.client.send(new ModifyRuleCommand({ RuleArn: this.config.ruleArn, Actions: actions }));
      else await this.client.send(new ModifyListenerCommand({ ListenerArn: this.arn, DefaultActions: actions }));
    } catch (err) {
      if (err instanceof Error && REFUSALS.has(err.name)) throw new TargetRefusedError(this.target, `${err.name}: ${err.message}`);
      throw err;
    }
    // A leader with a higher epoch that wrote since our re-read keeps its stamp: the read-back shows it.
    const holder = parseStamp(await this.loadTag());
    if (outranks(holder, stamp) === null) {
      await this.client.send(new AddTagsCommand({ ResourceArns: [this.arn], Tags: [{ Key: STAMP_TAG, Value: stampText(stamp) }] }));
    }
    return this.read(desired.newVersion);
  }

  private async load(): Promise<Reading> {
    const [actions, tag] = await Promise.all([this.loadActions(), this.loadTag()]);
    const forward = actions.find((a) => a.Type === 'forward');
    const groups = forward?.ForwardConfig?.TargetGroups?.length
      ? forward.ForwardConfig.TargetGroups.map((g) => ({ arn: g.TargetGroupArn ?? '', weight: g.Weight ?? 1 }))
      : forward?.TargetGroupArn !== undefined
        ? [{ arn: forward.TargetGroupArn, weight: 1 }]
        : [];
    const weightOf = (arn: string) => groups.filter((g) => g.arn === arn).reduce((sum, g) => sum + g.weight, 0);
    const { stableTargetGroupArn: stable, canaryTargetGroupArn: canary } = this.config;
    const sticky = forward?.ForwardConfig?.TargetGroupStickinessConfig;
    return {
      actions,
      forward,
      stable: weightOf(stable),
      canary: weightOf(canary),
      others: groups.filter((g) => g.arn !== stable && g.arn !== canary),
      listed: { stable: groups.some((g) => g.arn === stable), canary: groups.some((g) => g.arn === canary) },
      stickySeconds: sticky?.Enabled ? (sticky.DurationSeconds ?? null) : null,
      tag,
    };
  }

  private async loadActions(): Promise<Action[]> {
    if (this.config.ruleArn !== undefined) {
      const rule = (await this.client.send(new DescribeRulesCommand({ RuleArns: [this.config.ruleArn] }))).Rules?.[0];
      if (rule === undefined) throw new Error(`${this.target}: rule ${this.config.ruleArn} not found`);
      return rule.Actions ?? [];
    }
    const listener = (await this.client.send(new DescribeListenersCommand({ ListenerArns: [this.arn] }))).Listeners?.[0];
    if (listener === undefined) throw new Error(`${this.target}: listener ${this.arn} not found`);
    return listener.DefaultActions ?? [];
  }

  private async loadTag(): Promise<string | undefined> {
    const res = await this.client.send(new DescribeTagsCommand({ ResourceArns: [this.arn] }));
    return res.TagDescriptions?.find((d) => d.ResourceArn === this.arn)?.Tags?.find((t) => t.Key === STAMP_TAG)?.Value;
  }

  private observe(r: Reading): Observed {
    const stamp = parseStamp(r.tag);
    if (r.forward === undefined) {
      const types = r.actions.map((a) => a.Type).join(', ') || 'no action';
      const detail = `${this.where}: ${types}, no forward`;
      return { percent: 0, final: false, stamp, detail, foreignSplit: detail };
    }
    const total = r.stable + r.canary + r.others.reduce((sum, g) => sum + g.weight, 0);
    let percent = total > 0 ? Math.round((r.canary * 10_000) / total) / 100 : 0;
    let final = r.canary > 0 && r.canary === total;
    const foreign =
      r.others.length > 0 ? `${this.where} also forwards to ${r.others.map((g) => `${groupName(g.arn)} (weight ${g.weight})`).join(', ')}` : undefined;
    if (stamp !== null && foreign === undefined && r.listed.stable && r.listed.canary) {
      const ours = weightsFor(stamp.percent, stamp.final);
      // Weights our write of the stamp's percent produces: report the percent written, not the ratio's rounding of it.
      if (ours.stable === r.stable && ours.canary === r.canary) {
        percent = stamp.percent;
        final = stamp.final;
      }
    }
    const parts = [`stable ${r.stable}`, `canary ${r.canary} (${percent}%)`];
    for (const g of r.others) parts.push(`${groupName(g.arn)} ${g.weight}`);
    if (r.stickySeconds !== null) parts.push(`sticky ${r.stickySeconds} s`);
    const detail = `${this.where}: ${parts.join(', ')}`;
    return { percent, final, stamp, detail, ...(foreign !== undefined ? { foreignSplit: foreign } : {}) };
  }
}

/** What a caller decided on still holds: same split, same stamp. */
/** An action as described, in the shape ModifyRule takes back: ELBv2 never returns an OIDC client secret, so the one in place is kept. */
function resendable(a: Action): Action {
  if (a.Type !== 'authenticate-oidc' || a.AuthenticateOidcConfig === undefined) return a;
  const { ClientSecret: _secret, ...config } = a.AuthenticateOidcConfig;
  return { ...a, AuthenticateOidcConfig: { ...config, UseExistingClientSecret: true } };
}

function lastSegment(arn: string): string {
  return arn.slice(arn.lastIndexOf('/') + 1);
}

/** `…:targetgroup/web-canary/0123…` → `web-canary`. */
function groupName(arn: string): string {
  const m = /:targetgroup\/([^/]+)\//.exec(arn);
  return m?.[1] ?? arn;
}
