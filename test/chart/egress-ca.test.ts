/**
 * The egress proxy's deployment CA as hack/kind-up.sh (and docs/install.md) make it with openssl: the
 * proxy loads it from the mounted Secret's files as it is and signs leaves clients can verify, so
 * every replica of the proxy Deployment presents the one CA runners trust.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadOrCreateDeploymentCa } from '../../egress-proxy/deployment-ca.js';
import { ROOT } from '../helpers/acis-process.js';

const run = promisify(execFile);

describe('hack/kind-up.sh: the egress CA it makes', () => {
  it('is loaded by the egress proxy as it is, and signs leaves that verify', async () => {
    const script = await readFile(path.join(ROOT, 'hack', 'kind-up.sh'), 'utf8');
    // The openssl commands of the script, continuation lines included.
    const commands = script.replace(/\\\n\s*/g, ' ').split('\n').map((line) => line.trim()).filter((line) => line.startsWith('openssl '));
    expect(commands).toHaveLength(2);
    const caDir = await mkdtemp(path.join(tmpdir(), 'acis-egress-ca-'));
    try {
      await run('bash', ['-euo', 'pipefail', '-c', commands.join('\n')], { env: { ...process.env, ca_dir: caDir } });
      const ca = await loadOrCreateDeploymentCa(caDir);
      const leaf = new X509Certificate((await ca.issueLeaf('api.example.com')).certPem);
      const root = new X509Certificate(ca.certPem);
      expect(root.fingerprint256).toBe(new X509Certificate(await readFile(path.join(caDir, 'ca.crt'))).fingerprint256);
      expect(root.ca).toBe(true);
      expect(leaf.checkIssued(root)).toBe(true);
      expect(leaf.verify(root.publicKey)).toBe(true);
      expect(leaf.subjectAltName).toContain('api.example.com');
    } finally {
      await rm(caDir, { recursive: true, force: true });
    }
  });
});
