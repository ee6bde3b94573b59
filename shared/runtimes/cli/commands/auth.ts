import type { CommandSpec } from '../command-spec.js';
import { SCOPES } from '../../../auth/scopes.js';
import { mintToken, parseScopes } from '../../../auth/tokens.js';

/** `rollout auth`: credentials for nodes with authentication on. */
export const authCommand: CommandSpec = {
  name: 'auth',
  description: 'Credentials for nodes with authentication on',
  commands: [
    {
      name: 'token',
      description: 'Print a new random token, and the line to add to the tokens file (--auth-tokens-file): only its hash is kept there',
      options: [
        { flags: '--actor <name>', description: 'who the token acts as: recorded with every write it makes', required: true },
        { flags: '--scopes <scopes>', description: `what it may do, comma-separated: ${SCOPES.join(', ')}`, required: true },
        { flags: '--runs <ids>', description: 'a worker token: the runs it may ask work for, comma-separated, or * for any' },
        { flags: '--worker <id>', description: 'a worker token: the worker id it may ask as, or a prefix ending in * (host-a-*)' },
        { flags: '--json', description: 'print {token, line} as JSON', default: false },
      ],
      action: (o: { actor: string; scopes: string; runs?: string; worker?: string; json: boolean }) => {
        const binding = {
          ...(o.runs !== undefined ? { runs: o.runs === '*' ? ('any' as const) : o.runs.split(',').map((r) => r.trim()) } : {}),
          ...(o.worker !== undefined ? { worker: o.worker } : {}),
        };
        const { token, line } = mintToken(o.actor, parseScopes(o.scopes, '--scopes'), binding);
        process.stdout.write(
          o.json ? `${JSON.stringify({ token, line })}\n` : `token (shown once; give it to ${o.actor}):\n${token}\n\nline for the tokens file:\n${line}\n`,
        );
      },
    },
  ],
};
