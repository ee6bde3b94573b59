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
  // A table encrypted with a customer-managed key is unreadable without the key.
  if (table.encryptionKey) {
    if (access === 'read') table.encryptionKey.grantDecrypt(to);
    else table.encryptionKey.grantEncryptDecrypt(to);
  }
  to.grantPrincipal.addToPrincipalPolicy(
    new PolicyStatement({
      actions: [...ACTIONS[access]],
      resources: [table.tableArn, `${table.tableArn}/index/*`],
      conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [...new Set(leadingKeys)] } },
    }),
  );
}
