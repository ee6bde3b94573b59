import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A throwaway CA and a certificate it signed for 127.0.0.1 and localhost
 * (Debian's openssl), for TLS tests; `client` is a client certificate of the
 * same CA with the subject CN given.
 */
export interface TestCertificates {
  readonly dir: string;
  readonly caFile: string;
  readonly ca: Buffer;
  readonly certFile: string;
  readonly keyFile: string;
  client(cn: string): { certFile: string; keyFile: string; cert: Buffer; key: Buffer };
}

function openssl(args: string[], cwd: string): void {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr || r.error?.message}`);
}

export function testCertificates(): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'rollout-tls-'));
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '2',
      '-subj',
      '/CN=rollout test CA',
    ],
    dir,
  );
  const sign = (name: string, subject: string, ext: string) => {
    writeFileSync(join(dir, `${name}.ext`), ext);
    openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject], dir);
    openssl(
      [
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-out',
        `${name}.pem`,
        '-days',
        '2',
        '-extfile',
        `${name}.ext`,
      ],
      dir,
    );
  };
  sign('server', '/CN=127.0.0.1', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  return {
    dir,
    caFile: join(dir, 'ca.pem'),
    ca: readFileSync(join(dir, 'ca.pem')),
    certFile: join(dir, 'server.pem'),
    keyFile: join(dir, 'server.key'),
    client: (cn) => {
      const name = `client-${cn.replace(/[^A-Za-z0-9]/g, '_')}`;
      sign(name, `/CN=${cn}`, 'extendedKeyUsage=clientAuth\n');
      return {
        certFile: join(dir, `${name}.pem`),
        keyFile: join(dir, `${name}.key`),
        cert: readFileSync(join(dir, `${name}.pem`)),
        key: readFileSync(join(dir, `${name}.key`)),
      };
    },
  };
}
