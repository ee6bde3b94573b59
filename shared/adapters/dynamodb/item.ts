import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';

/**
 * Items returned inside exceptions (ConditionalCheckFailed, cancelled
 * transactions) come back in wire form even through the document client.
 */
export function plainItem(item: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!item) return undefined;
  const wire = Object.values(item).every((v) => v !== null && typeof v === 'object' && Object.keys(v).length === 1);
  return wire ? unmarshall(item as Record<string, AttributeValue>) : item;
}
