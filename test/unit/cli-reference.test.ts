import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { program } from '../../shared/runtimes/cli/cli.js';
import { cliReference } from '../../tools/docs/reference/cli.js';
import { cell, text as prose } from '../../tools/docs/reference/markdown.js';

/** The reference's sections by heading (`## rollout runs status`), each with its text. */
function sections(reference: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of reference.split(/^## /m).slice(1)) {
    const nl = part.indexOf('\n');
    out.set(part.slice(0, nl).trim(), part.slice(nl));
  }
  return out;
}

/** What the command tree commander runs has that the reference does not say, and the sections naming no command. */
function drift(cli: Command, reference: string): string[] {
  const bySection = sections(reference);
  const missing: string[] = [];
  const paths = new Set<string>();
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  const walk = (cmd: Command, path: string[]) => {
    const name = path.join(' ');
    const text = path.length === 1 ? reference.split(/^## /m)[0]! : bySection.get(name);
    if (path.length > 1) paths.add(name);
    if (text === undefined) {
      missing.push(`command ${name}`);
    } else {
      if (path.length > 1 && !text.includes(prose(cmd.description()))) missing.push(`description of ${name}`);
      for (const a of cmd.registeredArguments) {
        const arg = a.required ? `<${a.name()}${a.variadic ? '...' : ''}>` : `[${a.name()}${a.variadic ? '...' : ''}]`;
        if (!text.includes(`\`${arg}\``)) missing.push(`argument ${arg} of ${name}`);
      }
      for (const o of cmd.options) {
        // The option's row of the table; a cell escapes the pipes in a flag (`--queue <ledger|url>`).
        const row = text.split('\n').find((line) => line.startsWith(`| ${esc(`\`${o.flags}\``)} |`));
        if (row === undefined) {
          missing.push(`option ${o.flags} of ${name}`);
          continue;
        }
        if (!row.includes(cell(o.description))) missing.push(`description of ${o.flags} of ${name}`);
        if (o.envVar && !row.includes(`\`${o.envVar}\``)) missing.push(`env ${o.envVar} of ${o.flags} of ${name}`);
        if (o.defaultValue !== undefined && !row.includes(esc(`default \`${JSON.stringify(o.defaultValue)}\``)))
          missing.push(`default of ${o.flags} of ${name}`);
        if (o.mandatory && !row.includes('(required')) missing.push(`required ${o.flags} of ${name}`);
        for (const c of o.argChoices ?? []) if (!row.includes(`\`${c}\``)) missing.push(`choice ${c} of ${o.flags} of ${name}`);
      }
    }
    for (const sub of cmd.commands) walk(sub, [...path, sub.name()]);
  };
  walk(cli, [cli.name()]);
  for (const heading of bySection.keys()) if (!paths.has(heading)) missing.push(`section ${heading} names no command`);
  return missing;
}

describe('rollout CLI reference', () => {
  const reference = cliReference();

  it('covers every command, argument and option commander runs, with its description, environment variable, default and choices', () => {
    const cli = program();
    expect(drift(cli, reference)).toEqual([]);
    // The walk reached the whole tree (the leaves as well as the groups).
    expect(sections(reference).has('rollout rollouts status')).toBe(true);
    expect(sections(reference).has('rollout store resend-pending')).toBe(true);
  });

  it('would notice a command or an option added to commander outside the table, or a section left behind', () => {
    const cli = program();
    cli.command('extra').description('not in the table');
    cli.commands
      .find((c) => c.name() === 'runs')!
      .commands.find((c) => c.name() === 'status')!
      .option('--extra <x>', 'not in the table either');
    expect(drift(cli, reference)).toEqual(['option --extra <x> of rollout runs status', 'command rollout extra']);
    expect(drift(program(), `${reference}\n## rollout gone\n\nA command that was removed.\n`)).toEqual(['section rollout gone names no command']);
  });

  it('states the environment variable and default of an option as help does', () => {
    const serve = sections(reference).get('rollout serve')!;
    expect(serve).toContain('| `--lease-ttl <s>` | leadership lease duration (default `30`) | `CLUSTER_LEASE_TTL` |');
    expect(serve).toContain('| `--node-id <id>` | unique node id (required) | `CLUSTER_NODE_ID` |');
  });
});
