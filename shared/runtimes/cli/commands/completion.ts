import type { Command } from 'commander';
import type { CommandSpec } from '../command-spec.js';
import { completionScript } from '../completion.js';
import { UsageError } from '../errors.js';

/** `rollout completion`: a shell completion script drawn from the command tree. */
export const completionCommand: CommandSpec = {
  name: 'completion',
  description: 'Print a shell completion script: eval "$(rollout completion bash)" in ~/.bashrc, or rollout completion zsh > "${fpath[1]}/_rollout"',
  arguments: [{ name: '<shell>', description: 'bash or zsh' }],
  action: (shell: string, _options: unknown, command: Command) => {
    if (shell !== 'bash' && shell !== 'zsh') throw new UsageError(`completion: bash or zsh, not "${shell}"`);
    // The whole program's tree, from its root.
    process.stdout.write(completionScript(command.parent!, shell));
  },
};
