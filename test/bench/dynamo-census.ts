import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

/**
 * Counts the requests a store sends through one DynamoDB client, by kind,
 * while it is installed: what a promotion costs in round trips, for the
 * bench's breakdown (the DynamoDB twin of sql-census.ts). A kind is the
 * command and the table(s) it names (`TransactWriteItems rollouts`), a table
 * by the label the caller gives it (its own name otherwise). A command that
 * carries several items (TransactWriteItems, BatchWriteItem, BatchGetItem)
 * also counts them, as `<kind> items`. Counted as sent by the caller (a
 * middleware at the initialize step): the SDK's own retries of one are not.
 */
export interface DynamoCensus {
  /** The counts since the last take, and starts counting afresh. */
  take(): Record<string, number>;
  /** Takes the middleware off the client. */
  restore(): void;
}

type Input = {
  TableName?: string;
  TransactItems?: Record<string, { TableName?: string } | undefined>[];
  RequestItems?: Record<string, unknown[] | { Keys?: unknown[] }>;
};

/** The kind of one command's request, and how many items it carries (0: a single-item or query command). */
export function requestKind(commandName: string, input: Input, labels: Readonly<Record<string, string>> = {}): { kind: string; items: number } {
  const command = commandName.replace(/Command$/, '');
  const label = (t: string) => labels[t] ?? t;
  let tables: string[];
  let items = 0;
  if (input.TransactItems) {
    tables = input.TransactItems.flatMap((i) => Object.values(i).flatMap((a) => (a?.TableName ? [a.TableName] : [])));
    items = input.TransactItems.length;
  } else if (input.RequestItems) {
    tables = Object.keys(input.RequestItems);
    items = Object.values(input.RequestItems).reduce((n, r) => n + (Array.isArray(r) ? r.length : (r.Keys?.length ?? 0)), 0);
  } else {
    tables = input.TableName ? [input.TableName] : [];
  }
  const named = [...new Set(tables.map(label))].sort();
  return { kind: named.length ? `${command} ${named.join('+')}` : command, items };
}

const NAME = 'dynamoCensus';

export function dynamoCensus(client: DynamoDBClient | DynamoDBDocumentClient, labels: Readonly<Record<string, string>> = {}): DynamoCensus {
  let counts: Record<string, number> = {};
  const count = (kind: string, n = 1) => (counts[kind] = (counts[kind] ?? 0) + n);
  client.middlewareStack.add(
    (next, context) => (args) => {
      const { kind, items } = requestKind(context.commandName ?? 'Unknown', args.input as Input, labels);
      count(kind);
      if (items) count(`${kind} items`, items);
      return next(args);
    },
    { step: 'initialize', name: NAME, priority: 'high' },
  );
  return {
    take: () => {
      const out = counts;
      counts = {};
      return out;
    },
    restore: () => void client.middlewareStack.remove(NAME),
  };
}
