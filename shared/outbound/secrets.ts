import { readFile } from 'node:fs/promises';
import type { SecretRef } from './policy.js';
import { own } from '../own.js';

/**
 * Where an operator's secrets are read from when a request needs one: the
 * process's environment, a file, or AWS Secrets Manager (an adapter). A
 * value is kept for `ttlMs` (five minutes) so a rotated secret is picked up,
 * and forgotten at once when the origin refuses it (`forget`), so a rotation
 * costs one refused request, not five minutes of them.
 */
export interface SecretSource {
  get(ref: SecretRef): Promise<string>;
  /** The origin refused what was sent: read it again next time. */
  forget(ref: SecretRef): void;
}

/** Reads a Secrets Manager secret's string (an adapter; absent where there is no AWS). */
export type SecretsManagerRead = (secretId: string) => Promise<string>;

export class SecretNotFoundError extends Error {
  override readonly name = 'SecretNotFoundError';
}

export function describeRef(ref: SecretRef): string {
  if ('env' in ref) return `environment variable ${ref.env}`;
  if ('file' in ref) return `file ${ref.file}`;
  return `Secrets Manager secret ${ref.secretsManager}${ref.key ? ` (key ${ref.key})` : ''}`;
}

export class OperatorSecrets implements SecretSource {
  private readonly cache = new Map<string, { value: string; at: number }>();
  private readonly env: Readonly<Record<string, string | undefined>>;
  private readonly secretsManager: SecretsManagerRead | undefined;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(o: { env?: Readonly<Record<string, string | undefined>>; secretsManager?: SecretsManagerRead; ttlMs?: number; now?: () => number } = {}) {
    this.env = o.env ?? process.env;
    this.secretsManager = o.secretsManager;
    this.ttlMs = o.ttlMs ?? 300_000;
    this.now = o.now ?? Date.now;
  }

  async get(ref: SecretRef): Promise<string> {
    const key = JSON.stringify(ref);
    const hit = this.cache.get(key);
    if (hit && this.now() - hit.at < this.ttlMs) return hit.value;
    const value = await this.read(ref);
    if (!value) throw new SecretNotFoundError(`${describeRef(ref)} is empty`);
    this.cache.set(key, { value, at: this.now() });
    return value;
  }

  forget(ref: SecretRef): void {
    this.cache.delete(JSON.stringify(ref));
  }

  private async read(ref: SecretRef): Promise<string> {
    if ('env' in ref) {
      const v = own(this.env, ref.env);
      if (v === undefined) throw new SecretNotFoundError(`${describeRef(ref)} is not set where the control plane runs`);
      return v;
    }
    if ('file' in ref) {
      try {
        return (await readFile(ref.file, 'utf8')).trim();
      } catch (err) {
        throw new SecretNotFoundError(`${describeRef(ref)} cannot be read: ${(err as { code?: string }).code ?? 'error'}`);
      }
    }
    if (!this.secretsManager) throw new SecretNotFoundError(`${describeRef(ref)}: no Secrets Manager client in this process`);
    const text = await this.secretsManager(ref.secretsManager);
    if (ref.key === undefined) return text;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new SecretNotFoundError(`${describeRef(ref)} is not JSON, so it has no key ${ref.key}`);
    }
    const v = typeof parsed === 'object' ? own(parsed as Record<string, unknown> | null, ref.key) : undefined;
    if (typeof v !== 'string') throw new SecretNotFoundError(`${describeRef(ref)} has no string at key ${ref.key}`);
    return v;
  }
}
