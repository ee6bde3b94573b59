import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSplitNginx, type SplitNginx } from '../support/split-nginx.js';
import { TargetRefusedError, type Desired } from '../../shared/actuation/port.js';
import { NginxActuator } from '../../shared/adapters/actuators/nginx/actuator.js';

describe('nginx actuator on a real nginx', () => {
  let nginx: SplitNginx;
  beforeAll(async () => {
    nginx = await startSplitNginx();
  }, 60_000);
  afterAll(async () => nginx?.stop());

  const desired = (percent: number): Desired => ({ rolloutId: 'r-nginx', attempt: 1, stage: 0, percent, final: false, newVersion: 'v2', version: 1 });
  const stamp = (percent: number) => ({ rolloutId: 'r-nginx', attempt: 1, stage: 0, epoch: 1, percent, final: false });

  it('a config nginx refuses is never left in place: the previous file is back, byte for byte, and nginx serves on as before', async () => {
    const good = new NginxActuator('web', nginx.target);
    await good.write(desired(20), stamp(20), await good.read());
    const before = await readFile(nginx.target.include, 'utf8');
    const canaryBefore = await nginx.measure(500);
    // An expression nginx does not know: `nginx -t` fails on the generated include.
    const broken = new NginxActuator('web', { ...nginx.target, key: '$no_such_variable' });
    await expect(broken.write(desired(60), stamp(60), await broken.read())).rejects.toBeInstanceOf(TargetRefusedError);
    expect(await readFile(nginx.target.include, 'utf8')).toBe(before);
    expect(await nginx.measure(500)).toBe(canaryBefore);
  });

  it('sticky and monotone: a key on the new version stays there as the percent grows, and every key is back on stable after a rollback', async () => {
    const a = new NginxActuator('web', nginx.target);
    const onCanary = async () => {
      const keys = Array.from({ length: 400 }, (_, i) => `user-${i}`);
      const answers: string[] = [];
      // In batches: every request holds a client and an upstream connection of nginx's 512.
      for (let i = 0; i < keys.length; i += 50) answers.push(...(await Promise.all(keys.slice(i, i + 50).map((k) => nginx.ask(k)))));
      return new Set(keys.filter((_, i) => answers[i] === 'canary'));
    };
    await a.write(desired(10), stamp(10), await a.read());
    const at10 = await onCanary();
    expect(await onCanary()).toEqual(at10);
    await a.write(desired(50), stamp(50), await a.read());
    const at50 = await onCanary();
    expect([...at10].every((k) => at50.has(k))).toBe(true);
    expect(at50.size).toBeGreaterThan(at10.size);
    await a.write(desired(0), stamp(0), await a.read());
    expect((await onCanary()).size).toBe(0);
  });
});
