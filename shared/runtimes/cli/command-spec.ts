import { Option, type Command } from 'commander';

/**
 * Commands declared as data: the table in commands/ is what commander is
 * built from, and what the reference (reference.ts) is printed from, so the
 * two cannot say different things.
 */

export interface OptionSpec {
  /** As commander takes them: `--port <port>`, `--run <id...>`, `--no-demo`, `-V, --version`. */
  readonly flags: string;
  readonly description: string;
  /** The environment variable that gives the value when the flag is absent. */
  readonly env?: string;
  readonly default?: unknown;
  /** Turns the text into the value; throws commander's InvalidArgumentError (exit 2) naming the flag. */
  readonly parser?: (value: string) => unknown;
  readonly choices?: readonly string[];
  /** The option must be given (on the command line or through `env`). */
  readonly required?: boolean;
}

export interface ArgumentSpec {
  /** `<id>` (required) or `[id]` (optional). */
  readonly name: string;
  readonly description?: string;
}

/**
 * What commander calls with the arguments, then the options, then the command.
 * Each action types its own parameters; `never` lets any of them stand here.
 */
export type Action = (...args: never[]) => unknown;

export interface CommandSpec {
  readonly name: string;
  readonly description: string;
  readonly arguments?: readonly ArgumentSpec[];
  /** In the order help lists them. */
  readonly options?: readonly OptionSpec[];
  readonly action?: Action;
  /** A group (`rollouts`, `runs`) has subcommands and no action of its own. */
  readonly commands?: readonly CommandSpec[];
}

export function buildOption(spec: OptionSpec): Option {
  const option = new Option(spec.flags, spec.description);
  if (spec.choices) option.choices(spec.choices);
  if (spec.parser) option.argParser(spec.parser);
  if (spec.env) option.env(spec.env);
  if (spec.default !== undefined) option.default(spec.default);
  if (spec.required) option.makeOptionMandatory();
  return option;
}

/** Adds `spec` (and its subcommands) under `parent`; made by `parent.command()`, it inherits the parent's settings (exitOverride, help after an error). */
export function addCommand(parent: Command, spec: CommandSpec): Command {
  const cmd = parent.command(spec.name).description(spec.description);
  for (const a of spec.arguments ?? []) cmd.argument(a.name, a.description);
  for (const o of spec.options ?? []) cmd.addOption(buildOption(o));
  if (spec.action) cmd.action(spec.action as unknown as (...args: unknown[]) => void | Promise<void>);
  for (const sub of spec.commands ?? []) addCommand(cmd, sub);
  return cmd;
}
