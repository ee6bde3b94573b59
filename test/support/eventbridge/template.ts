/** The EventBridge rules of a synthesized template, with every reference resolved to a name or ARN. */
export interface TemplateRule {
  /** The rule's logical id. */
  readonly id: string;
  readonly bus: string;
  readonly pattern?: string;
  readonly schedule?: string;
  readonly targets: { Id: string; Arn: string; Input?: string }[];
}

type Cfn = { Type: string; Properties: Record<string, unknown> };
type Ref = { Ref?: string; 'Fn::GetAtt'?: [string, string] };

/** `names` gives the physical name or ARN of each logical id the rules refer to (buses, functions, queues), as a deployment would have made them. */
export function templateRules(template: { Resources: Record<string, Cfn> }, names: Record<string, string>): TemplateRule[] {
  const resolve = (v: unknown): string => {
    if (typeof v === 'string') return v;
    const r = v as Ref;
    const id = r.Ref ?? r['Fn::GetAtt']?.[0];
    if (!id || !(id in names)) throw new Error(`template refers to ${JSON.stringify(v)}: give its name`);
    return names[id]!;
  };
  return Object.entries(template.Resources)
    .filter(([, res]) => res.Type === 'AWS::Events::Rule')
    .map(([id, { Properties: p }]) => ({
      id,
      bus: p.EventBusName ? resolve(p.EventBusName) : 'default',
      ...(p.EventPattern ? { pattern: JSON.stringify(p.EventPattern) } : {}),
      ...(p.ScheduleExpression ? { schedule: p.ScheduleExpression as string } : {}),
      targets: (p.Targets as Record<string, unknown>[]).map((t) => ({
        Id: String(t.Id),
        Arn: resolve(t.Arn),
        ...(t.Input ? { Input: t.Input as string } : {}),
      })),
    }));
}
