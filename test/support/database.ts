import { afterAll, beforeAll } from 'vitest';
import { freshDatabase } from './backends.js';

/**
 * A database of this test file's own on the harness's PostgreSQL (nodes
 * migrate the public schema, so they cannot share one): created before the
 * file's tests, dropped after them. `url` is readable once they run.
 */
export function databaseForFile(prefix: string): { readonly url: string } {
  let db: Awaited<ReturnType<typeof freshDatabase>> | undefined;
  beforeAll(async () => {
    db = await freshDatabase(prefix);
  });
  afterAll(() => db?.drop());
  return {
    get url() {
      if (!db) throw new Error(`the ${prefix} database is made before the file's tests run`);
      return db.url;
    },
  };
}
