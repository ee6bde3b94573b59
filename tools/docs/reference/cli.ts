import type { ArgumentSpec, CommandSpec, OptionSpec } from '../../../shared/runtimes/cli/command-spec.js';
import { COMMAND_TABLE, ROOT } from '../../../shared/runtimes/cli/commands/index.js';
import { cell, code, GENERATED, page, table, text } from './markdown.js';

/**
 * The CLI reference: every command and option, written from the same table
 * the commands are built from (shared/runtimes/cli/commands/), so it cannot
 * drift from them. A section per command, headed by its full name
 * (`## rollout runs status`, anchor `#rollout-runs-status`).
 */
export function cliReference(): string {
  const out: string[] = [
    '# CLI reference',
    GENERATED('the command table, shared/runtimes/cli/commands/'),
    `${code(ROOT.name)}: ${text(ROOT.description)} Installed with the package (${code(`npx ${ROOT.name} <command>`)}); from a checkout, ${code(`npm run ${ROOT.name} -- <command>`)}.`,
    `${text(ROOT.exitCodes)}`,
    'Every command takes `-h, --help`. An option with an environment variable takes its value from it when the flag is absent.',
    optionTable([ROOT.version]),
    `Commands: ${COMMAND_TABLE.map((c) => `[${c.name}](#${anchor([ROOT.name, c.name])})`).join(', ')}.`,
  ];
  const walk = (spec: CommandSpec, path: readonly string[]) => {
    const here = [...path, spec.name];
    out.push(`## ${here.join(' ')}`, text(spec.description));
    if (spec.commands?.length)
      out.push(`Commands: ${spec.commands.map((c) => `[${code([...here, c.name].join(' '))}](#${anchor([...here, c.name])})`).join(', ')}.`);
    if (spec.arguments?.length || spec.action) out.push(`\`\`\`text\n${usage(here, spec)}\n\`\`\``);
    if (spec.arguments?.length) out.push(argumentList(spec.arguments));
    if (spec.options?.length) out.push(optionTable(spec.options));
    for (const sub of spec.commands ?? []) walk(sub, here);
  };
  for (const spec of COMMAND_TABLE) walk(spec, [ROOT.name]);
  return page(out);
}

/** VitePress's anchor of a heading made of plain words: lower case, joined by hyphens. */
const anchor = (words: readonly string[]) => words.join('-').toLowerCase();

function usage(path: readonly string[], spec: CommandSpec): string {
  return [...path, ...(spec.options?.length ? ['[options]'] : []), ...(spec.arguments ?? []).map((a) => a.name)].join(' ');
}

function argumentList(args: readonly ArgumentSpec[]): string {
  return args.map((a) => `- ${code(a.name)}${a.description ? `: ${text(a.description)}` : ''}`).join('\n');
}

/** One row an option: its flags, what it does with required/choices/default, its environment variable. */
function optionTable(options: readonly OptionSpec[]): string {
  return table(
    ['Option', 'Description', 'Environment'],
    options.map((o) => {
      const notes = [
        ...(o.required ? ['required'] : []),
        ...(o.choices ? [`one of ${o.choices.map(code).join(', ')}`] : []),
        ...(o.default !== undefined ? [`default ${code(JSON.stringify(o.default))}`] : []),
      ];
      return [code(o.flags), `${cell(o.description)}${notes.length ? ` (${notes.join('; ')})` : ''}`, o.env ? code(o.env) : ''];
    }),
  );
}
