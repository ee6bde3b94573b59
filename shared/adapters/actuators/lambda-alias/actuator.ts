import {
  GetAliasCommand,
  InvalidParameterValueException,
  LambdaClient,
  PreconditionFailedException,
  UpdateAliasCommand,
  type AliasConfiguration,
} from '@aws-sdk/client-lambda';
import {
  parseStamp,
  stampText,
  TargetMovedError,
  TargetRefusedError,
  type Actuator,
  type Desired,
  type Observed,
  type Stamp,
} from '../../../actuation/port.js';
import { lambdaVersionIssues, type LambdaAliasTarget } from '../../../actuation/targets.js';

/**
 * A Lambda alias as an actuation target: the new version's share is the
 * alias's weighted routing (AdditionalVersionWeights, a fraction), the alias's
 * own version is the stable side, and our stamp is the alias's Description.
 * Every write is conditioned on the RevisionId it was decided on.
 *
 * The stable version is the one the alias served when the rollout started: it
 * travels in the stamp (`base`), because once the alias is finalised on the
 * new version, a rollback could not learn it from the alias any more. A
 * reading reports it (`servedVersion`), so that a rollout whose judged gates
 * read another version as the baseline is paused before the alias first
 * moves (reconcile.ts, `decide`).
 */

/** Lambda keeps at most 256 characters of an alias's description. */
const DESCRIPTION_MAX = 256;

/** 2-decimal percents and Lambda's fractions, both ways without drift (12.34 % ↔ 0.1234). */
const weightOf = (percent: number) => Math.round(percent * 100) / 10_000;
const percentOf = (weight: number) => Math.round(weight * 10_000) / 100;

export class LambdaAliasActuator implements Actuator {
  readonly kind = 'lambdaAlias' as const;
  private readonly lambda: LambdaClient;

  constructor(
    readonly target: string,
    private readonly config: LambdaAliasTarget,
    /** Absent: the default client (its endpoint from AWS_ENDPOINT_URL_LAMBDA when set), in the target's region. */
    lambda?: LambdaClient,
  ) {
    this.lambda = lambda ?? new LambdaClient(config.region ? { region: config.region } : {});
  }

  async read(newVersion: string): Promise<Observed> {
    return this.observe(await this.alias(), newVersion);
  }

  async write(desired: Desired, stamp: Stamp, observed: Observed): Promise<Observed> {
    const issues = lambdaVersionIssues(desired.newVersion);
    if (issues.length > 0) throw new TargetRefusedError(this.target, issues.join('; '));
    // A reading without a RevisionId was not made here; reading again gives one.
    if (observed.revision === undefined) throw new TargetMovedError(this.target, 'the reading carries no RevisionId to condition the write on');
    const mine = observed.stamp !== null && observed.stamp.rolloutId === desired.rolloutId ? observed.stamp.base : undefined;
    const base = mine ?? (await this.versionAt(observed.revision));
    const description = stampText({ ...stamp, base });
    if (description.length > DESCRIPTION_MAX)
      throw new TargetRefusedError(this.target, `the stamp is ${description.length} characters, an alias description holds ${DESCRIPTION_MAX}`);
    const split = !desired.final && desired.percent > 0;
    if (split && base === desired.newVersion)
      throw new TargetRefusedError(this.target, `the alias serves version ${base} already: there is no other version to split from`);
    try {
      await this.lambda.send(
        new UpdateAliasCommand({
          FunctionName: this.config.functionName,
          Name: this.config.alias,
          FunctionVersion: desired.final ? desired.newVersion : base,
          Description: description,
          // An empty map, not an absent field: UpdateAlias keeps a RoutingConfig it is not given.
          RoutingConfig: { AdditionalVersionWeights: split ? { [desired.newVersion]: weightOf(desired.percent) } : {} },
          RevisionId: observed.revision,
        }),
      );
    } catch (err) {
      if (err instanceof PreconditionFailedException) throw new TargetMovedError(this.target, err.message);
      // Lambda answers its model's constraints (a weight out of range) with ValidationException, which the SDK has no class for.
      if (err instanceof InvalidParameterValueException || (err instanceof Error && err.name === 'ValidationException'))
        throw new TargetRefusedError(this.target, err.message);
      throw err;
    }
    return this.read(desired.newVersion);
  }

  /**
   * The alias's version in the reading at `revision`: a reading does not
   * carry it, and the alias still at that RevisionId is that same reading.
   */
  private async versionAt(revision: string): Promise<string> {
    const now = await this.alias();
    if (now.RevisionId !== revision)
      throw new TargetMovedError(this.target, `RevisionId ${revision} was read, the alias is now at ${now.RevisionId ?? 'none'}`);
    if (now.FunctionVersion === undefined) throw new TargetRefusedError(this.target, 'the alias reports no version');
    return now.FunctionVersion;
  }

  private async alias(): Promise<AliasConfiguration> {
    return this.lambda.send(new GetAliasCommand({ FunctionName: this.config.functionName, Name: this.config.alias }));
  }

  private observe(a: AliasConfiguration, newVersion: string): Observed {
    const version = a.FunctionVersion ?? '?';
    const weights = Object.entries(a.RoutingConfig?.AdditionalVersionWeights ?? {}).filter(([, w]) => w > 0);
    const shares = weights.map(([v, w]) => `${percentOf(w)}% on ${v}`);
    const foreign = weights.filter(([v]) => v !== newVersion).map(([v, w]) => `${percentOf(w)}% on version ${v}`);
    const onNew = weights.find(([v]) => v === newVersion)?.[1] ?? 0;
    return {
      percent: percentOf(onNew),
      final: weights.length === 0 && version === newVersion,
      stamp: parseStamp(a.Description),
      detail: [`alias ${this.config.alias} → ${version}`, ...shares, `revision ${a.RevisionId ?? 'none'}`].join(', '),
      ...(a.RevisionId !== undefined ? { revision: a.RevisionId } : {}),
      ...(a.FunctionVersion !== undefined ? { servedVersion: a.FunctionVersion } : {}),
      ...(foreign.length > 0 ? { foreignSplit: `alias ${this.config.alias} → ${version} sends ${foreign.join(', ')}` } : {}),
    };
  }
}
