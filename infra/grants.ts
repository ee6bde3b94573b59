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

/**
 * Read and write of one partition whose key holds a policy variable, e.g.
 * `INSTANCE#${ec2:SourceInstanceARN}`: an EC2 instance role's request carries
 * the ARN of the instance it comes from (a global condition key, usable as a
 * variable in a condition), so each instance reaches its own partition only.
 * StringEquals: the resolved value is matched as it is, no wildcard in it
 * read as one. Where the variable is absent (credentials used off the
 * instance) the condition cannot match and nothing is granted.
 */
export function grantBoundPartition(to: IGrantable, table: ITable, partition: string): void {
  if (!/\$\{[a-z0-9-]+:[A-Za-z0-9]+\}/.test(partition)) throw new Error(`grantBoundPartition: ${partition} holds no policy variable: use grantItems`);
  table.encryptionKey?.grantEncryptDecrypt(to);
  to.grantPrincipal.addToPrincipalPolicy(
    new PolicyStatement({
      actions: [...ACTIONS.read, ...ACTIONS.write],
      resources: [table.tableArn],
      conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [partition] } },
    }),
  );
}
