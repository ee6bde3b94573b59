import { readFile, writeFile } from 'node:fs/promises';
import { startSplitNginx } from '../split-nginx.js';
import { NginxActuator } from '../../../shared/adapters/actuators/nginx/actuator.js';
import type { ActuatorFixture } from './fixture.js';

/** The nginx actuator over a real nginx splitting real requests between two tiny versions. */
export function nginxFixture(): ActuatorFixture {
  return {
    kind: 'nginx',
    async setup() {
      const nginx = await startSplitNginx();
      const actuator = new NginxActuator('web', nginx.target);
      return {
        actuator,
        newVersion: 'v2',
        measuredPercent: () => nginx.measure(2_000),
        // A person editing the include: the first entry's share changes, the stamp line stays.
        async tamper(percent) {
          const text = await readFile(nginx.target.include, 'utf8');
          const body = percent > 0 ? `    ${percent}%  canary;\n    *  stable;\n` : '    *  stable;\n';
          await writeFile(nginx.target.include, text.replace(/(\$rollout_upstream \{)[^}]*\}/, `$1\n${body}}`));
        },
        close: () => nginx.stop(),
      };
    },
  };
}
