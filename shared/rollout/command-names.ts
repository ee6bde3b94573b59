/** The manual controls' names, for the API's routes, the CLI and the client (the commands themselves are `commands.ts`). */
export const COMMANDS = ['promote', 'promote-full', 'pause', 'resume', 'abort', 'retry'] as const;
export type Command = (typeof COMMANDS)[number];
