import type { Command } from 'commander';
import { packageVersion } from './version.js';

/**
 * A completion script drawn from the command tree itself, so it never lags
 * behind the commands: each command path (`rollouts status`) maps to the
 * words that may follow it (its subcommands, then its options).
 */
export function completionScript(cli: Command, shell: 'bash' | 'zsh'): string {
  const table: [string, string][] = [];
  const walk = (cmd: Command, path: string[]) => {
    const words = [...cmd.commands.map((c) => c.name()), ...cmd.options.flatMap((o) => [o.long, o.short].filter((f): f is string => Boolean(f)))];
    table.push([path.join(' '), [...new Set(words)].join(' ')]);
    for (const sub of cmd.commands) walk(sub, [...path, sub.name()]);
  };
  walk(cli, []);
  const cases = table.map(([path, words]) => `    "${path}") words="${words}" ;;`).join('\n');
  const body = `_rollout() {
  local cur path="" w words=""
  cur="\${COMP_WORDS[COMP_CWORD]}"
  # The command path: the words before the cursor that are not options or their values.
  for w in "\${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
    case "$w" in -*) ;; *) case " $(_rollout_words "$path") " in *" $w "*) path="\${path:+$path }$w" ;; esac ;; esac
  done
  words="$(_rollout_words "$path")"
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
}
_rollout_words() {
  local words=""
  case "$1" in
${cases}
  esac
  printf '%s' "$words"
}
`;
  return shell === 'bash'
    ? `# rollout ${packageVersion()} completion (bash)\n${body}complete -o default -F _rollout rollout\n`
    : `#compdef rollout\n# rollout ${packageVersion()} completion (zsh, through bash's)\nautoload -U +X bashcompinit && bashcompinit\n${body}complete -o default -F _rollout rollout\n`;
}
