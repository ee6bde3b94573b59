import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { apiReference, type OpenApiDocument } from './api.js';
import { benchmarksReference } from './benchmarks.js';
import { cliReference } from './cli.js';
import { configurationReference } from './configuration.js';
import { metricsReference } from './metrics.js';
import { root } from './source.js';
import { specReference } from './spec.js';

/**
 * The generated reference pages (docs/reference/), by path: written by
 * `npm run docs:reference`, and rebuilt in memory by the freshness test
 * (test/unit/docs-reference.test.ts), which fails when a committed page
 * differs. Deterministic: the same sources give the same bytes.
 */
export function referencePages(): Map<string, string> {
  const openapi = JSON.parse(readFileSync(resolve(root, 'openapi.json'), 'utf8')) as OpenApiDocument;
  return new Map([
    ['docs/reference/api.md', apiReference(openapi)],
    ['docs/reference/cli.md', cliReference()],
    ['docs/reference/configuration.md', configurationReference()],
    ['docs/reference/metrics.md', metricsReference()],
    ['docs/reference/spec.md', specReference()],
    ['docs/reference/benchmarks.md', benchmarksReference()],
  ]);
}

// `npm run docs:reference` writes every page.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  for (const [path, text] of referencePages()) {
    const file = resolve(root, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
    console.log(`wrote ${path}`);
  }
}
