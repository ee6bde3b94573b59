import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openApiDocument } from '../shared/api/contract.js';

/**
 * `npm run openapi`: writes the API's OpenAPI 3.1 document, generated from
 * its one definition (shared/api/routes/, by resource; shared/api/openapi.ts), to openapi.json (or the path
 * given). A node serves the same at GET /openapi.json.
 */
const out = process.argv[2] ?? join(import.meta.dirname, '..', 'openapi.json');
writeFileSync(out, `${JSON.stringify(openApiDocument(), null, 2)}\n`);
console.log(`wrote ${out}`);
