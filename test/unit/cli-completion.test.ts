import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { completionScript, program } from '../../shared/runtimes/cli/cli.js';

/** What bash offers after `words` (the last one being completed), with the script sourced. */
function offered(script: string, words: string[]): string[] {
  const arr = words.map((w) => `'${w}'`).join(' ');
  const r = spawnSync('bash', ['-c', `${script}\nCOMP_WORDS=(${arr}); COMP_CWORD=${words.length - 1}; _rollout; printf '%s\\n' "\${COMPREPLY[@]}"`], {
    encoding: 'utf8',
  });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.split('\n').filter(Boolean);
}

describe('rollout completion', () => {
  const bash = completionScript(program(), 'bash');

  it('offers the subcommands and options of the command path typed so far, skipping options and their values', () => {
    expect(offered(bash, ['rollout', 'roll'])).toEqual(['rollouts']);
    expect(offered(bash, ['rollout', 'rollouts', 'st'])).toEqual(['status']);
    expect(offered(bash, ['rollout', 'rollouts', 'status', 'ro-1', '--ti'])).toEqual(['--timeout']);
    expect(offered(bash, ['rollout', '--url', 'http://x', 'runs', 're'])).toEqual(['results']);
  });

  it('is drawn from the command tree: every command is offered under its parent', () => {
    const top = offered(bash, ['rollout', '']);
    for (const c of program().commands) expect(top).toContain(c.name());
  });

  it('zsh gets the same function through bashcompinit', () => {
    const zsh = completionScript(program(), 'zsh');
    expect(zsh.startsWith('#compdef rollout\n')).toBe(true);
    expect(zsh).toContain('bashcompinit');
    expect(zsh).toContain('complete -o default -F _rollout rollout');
  });
});
