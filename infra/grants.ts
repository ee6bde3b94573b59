import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement, type IGrantable } from 'aws-cdk-lib/aws-iam';

/**
 * Item access on the store held to some partition keys (`dynamodb:LeadingKeys`,
 * on the table and its indexes). No Scan, which has no leading key for the
 * condition to check; no table-level actions.
 */
const ACTIONS = {
  read: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', 'dynamodb:ConditionCheckItem'],
  write: ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:BatchWriteItem'],
} as const;

export function grantItems(to: IGrantable, table: ITable, access: keyof typeof ACTIONS, leadingKeys: readonly string[]): void {
  to.grantPrincipal.addToPrincipalPolicy(
    new PolicyStatement({
      actions: [...ACTIONS[access]],
      resources: [table.tableArn, `${table.tableArn}/index/*`],
      conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [...new Set(leadingKeys)] } },
    }),
  );
}
