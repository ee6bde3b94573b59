// Module-load hooks for the chaos harness's broken variants (see variants.ts).
// Registered after tsx, so they run first: a targeted file is read, edited and
// transpiled here; every other module goes on to tsx untouched.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { transform } from 'esbuild';

let edits = [];
let root = '';

export function initialize(data) {
  edits = data.edits;
  root = data.root;
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file://')) return nextLoad(url, context);
  const path = fileURLToPath(url);
  const mine = edits.filter((e) => path === `${root}/${e.file}`);
  if (!mine.length) return nextLoad(url, context);
  let source = await readFile(path, 'utf8');
  for (const e of mine) {
    if (!source.includes(e.find)) throw new Error(`chaos variant: "${e.find.slice(0, 80)}" not found in ${e.file}`);
    if (!e.last && source.split(e.find).length !== 2) throw new Error(`chaos variant: "${e.find.slice(0, 80)}" found more than once in ${e.file}`);
    // `last`: the definition in force when a later migration redefines a function.
    const at = source.lastIndexOf(e.find);
    source = source.slice(0, at) + e.replace + source.slice(at + e.find.length);
  }
  const out = await transform(source, { loader: 'ts', format: 'esm', sourcefile: path, sourcemap: 'inline', target: 'node20' });
  return { format: 'module', source: out.code, shortCircuit: true };
}
