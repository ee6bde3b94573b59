import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Help, type Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { program } from '../../shared/runtimes/cli/cli.js';
import { operations, type OpenApiDocument } from '../../tools/docs/reference/api.js';
import { referencePages } from '../../tools/docs/reference/index.js';

const root = resolve(import.meta.dirname, '../..');
const committed = (path: string) => {
  try {
    return readFileSync(resolve(root, path), 'utf8');
  } catch {
    return null;
  }
};

/** The pages whose committed text is not what the generator writes now. */
function stale(pages: ReadonlyMap<string, string>, read: (path: string) => string | null): string[] {
  return [...pages].filter(([path, text]) => read(path) !== text).map(([path]) => path);
}

/** Every command path `--help` lists, walking commander's tree as help does (visible commands only). */
function helpCommands(cmd: Command, path: readonly string[] = [cmd.name()]): string[] {
  return new Help().visibleCommands(cmd).flatMap((sub) => {
    if (sub.name() === 'help') return [];
    const here = [...path, sub.name()];
    return [here.join(' '), ...helpCommands(sub, here)];
  });
}

describe('generated reference pages (docs/reference/)', () => {
  // Building the pages loads the CDK (the alarms are built in a throwaway stack): allow for a slow machine.
  const pages = referencePages();

  it('are as npm run docs:reference writes them (run it after changing their sources)', () => {
    expect(stale(pages, committed), 'stale pages: run npm run docs:reference').toEqual([]);
  }, 120_000);

  it('are each headed as the site expects', () => {
    const headings = [...pages].map(([path, text]) => [path, text.split('\n')[0]]);
    expect(headings).toEqual([
      ['docs/reference/api.md', '# HTTP API reference'],
      ['docs/reference/cli.md', '# CLI reference'],
      ['docs/reference/configuration.md', '# Configuration reference'],
      ['docs/reference/metrics.md', '# Metrics and alerts reference'],
      ['docs/reference/spec.md', '# Rollout spec reference'],
      ['docs/reference/benchmarks.md', '# Benchmark figures'],
    ]);
  });

  it('notice a page edited by hand, or one missing', () => {
    const [path, text] = [...pages][0]!;
    expect(stale(pages, (p) => (p === path ? `${text}edited\n` : pages.get(p)!))).toEqual([path]);
    expect(stale(pages, (p) => (p === path ? null : pages.get(p)!))).toEqual([path]);
  });

  it('the CLI page has a section for every command rollout --help lists, down the tree', () => {
    const page = committed('docs/reference/cli.md') ?? '';
    const listed = helpCommands(program());
    expect(listed).toContain('rollout rollouts status');
    expect(listed).toContain('rollout store resend-pending');
    expect(listed.filter((c) => !page.includes(`\n## ${c}\n`))).toEqual([]);
  });

  it('the API page has a section for every operationId in openapi.json', () => {
    const page = committed('docs/reference/api.md') ?? '';
    const doc = JSON.parse(readFileSync(resolve(root, 'openapi.json'), 'utf8')) as OpenApiDocument;
    const ids = operations(doc).map((o) => o.op.operationId);
    expect(ids.length).toBeGreaterThan(30);
    expect(ids.filter((id) => !page.includes(`\n### ${id} {#${id}}\n`))).toEqual([]);
  });
});
