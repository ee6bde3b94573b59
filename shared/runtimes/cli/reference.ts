import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import type { ArgumentSpec, CommandSpec, OptionSpec } from './command-spec.js';
import { COMMAND_TABLE, ROOT } from './commands/index.js';

/**
 * A Markdown reference of every command and option, printed from the same
 * table the commands are built from (commands/), so it cannot drift from them:
 *
 *   node --import tsx shared/runtimes/cli/reference.ts > docs/reference/cli.md
 */
export function cliReference(): string {
  const out: string[] = [
    `# ${ROOT.name}`,
    '',
    `${ROOT.description}`,
    '',
    ROOT.exitCodes,
    '',
    'Every command takes `-h, --help`.',
    '',
    optionTable([ROOT.version]),
  ];
  const walk = (spec: CommandSpec, path: readonly string[]) => {
    const here = [...path, spec.name];
    out.push('', `## ${here.join(' ')}`, '', spec.description);
    if (spec.commands?.length) out.push('', `Commands: ${spec.commands.map((c) => `\`${[...here, c.name].join(' ')}\``).join(', ')}.`);
    if (spec.arguments?.length || spec.action) out.push('', `\`\`\`\n${usage(here, spec)}\n\`\`\``);
    if (spec.arguments?.length) out.push('', argumentList(spec.arguments));
    if (spec.options?.length) out.push('', optionTable(spec.options));
    for (const sub of spec.commands ?? []) walk(sub, here);
  };
  for (const spec of COMMAND_TABLE) walk(spec, [ROOT.name]);
  return `${out.join('\n')}\n`;
}

function usage(path: readonly string[], spec: CommandSpec): string {
  return [...path, ...(spec.options?.length ? ['[options]'] : []), ...(spec.arguments ?? []).map((a) => a.name)].join(' ');
}

function argumentList(args: readonly ArgumentSpec[]): string {
  return args.map((a) => `- \`${a.name}\`${a.description ? `: ${a.description}` : ''}`).join('\n');
}

/** A table cell: one line, with the pipes that would end the cell escaped. */
const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const code = (s: string) => `\`${cell(s)}\``;

function optionTable(options: readonly OptionSpec[]): string {
  const rows = options.map((o) => {
    const notes = [
      ...(o.required ? ['required'] : []),
      ...(o.choices ? [`one of ${o.choices.map(code).join(', ')}`] : []),
      ...(o.default !== undefined ? [`default ${code(JSON.stringify(o.default))}`] : []),
    ];
    return `| ${code(o.flags)} | ${cell(o.description)}${notes.length ? ` (${notes.join('; ')})` : ''} | ${o.env ? code(o.env) : ''} |`;
  });
  return ['| Option | Description | Environment |', '| --- | --- | --- |', ...rows].join('\n');
}

// `node --import tsx shared/runtimes/cli/reference.ts` prints the reference.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  process.stdout.write(cliReference());
}
