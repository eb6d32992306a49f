/**
 * The egress proxy's deployment CA as the chart generates it (helm's genCAWithKey) and as an
 * operator bringing their own makes it with docs/install.md's openssl commands: the proxy loads it
 * from the mounted Secret's files as it is and signs leaves clients can verify, so every replica of
 * the proxy Deployment presents the one CA runners trust.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, createServer } from 'node:tls';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadOrCreateDeploymentCa } from '../../egress-proxy/deployment-ca.js';
import { ROOT } from '../helpers/acis-process.js';
import { find, renderChart } from './chart-render.js';

const run = promisify(execFile);

describe('docs/install.md: the egress CA its openssl commands make', () => {
  it('is loaded by the egress proxy as it is, and signs leaves that verify', async () => {
    const doc = await readFile(path.join(ROOT, 'docs', 'install.md'), 'utf8');
    // The openssl commands of the page, continuation lines included.
    const commands = doc
      .replace(/\\\n\s*/g, ' ')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('openssl '));
    expect(commands).toHaveLength(2);
    const caDir = await mkdtemp(path.join(tmpdir(), 'acis-egress-ca-'));
    try {
      await run('bash', ['-euo', 'pipefail', '-c', commands.join('\n')], { cwd: caDir });
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

describe('charts/acis: the egress CA it generates', () => {
  it("is loaded by the egress proxy from the Secret's files, and a client trusting the ConfigMap's certificate accepts its leaves", async () => {
    const objects = await renderChart();
    const secret = (find(objects, 'Secret', 'acis-egress-ca-key') as unknown as { data: Record<string, string> }).data;
    const trusted = (find(objects, 'ConfigMap', 'acis-egress-ca') as unknown as { data: Record<string, string> }).data['ca.crt']!;
    const caDir = await mkdtemp(path.join(tmpdir(), 'acis-egress-ca-'));
    try {
      for (const file of ['ca.crt', 'ca.key'])
        await writeFile(path.join(caDir, file), Buffer.from(secret[file]!, 'base64'), { mode: 0o440 });
      const ca = await loadOrCreateDeploymentCa(caDir);
      expect(new X509Certificate(ca.certPem).fingerprint256).toBe(new X509Certificate(trusted).fingerprint256);
      // A TLS handshake as a runner makes one through the proxy: the leaf for the host, checked against the trusted CA alone.
      const server = createServer(
        { SNICallback: (host, done) => ca.secureContextFor(host).then((context) => done(null, context), done) },
        (socket) => socket.end(),
      );
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      try {
        const socket = connect({
          host: '127.0.0.1',
          port: (server.address() as AddressInfo).port,
          servername: 'api.anthropic.com',
          ca: trusted,
        });
        await once(socket, 'secureConnect');
        expect(socket.authorized).toBe(true);
        expect(socket.getPeerCertificate().subjectaltname).toBe('DNS:api.anthropic.com');
        socket.destroy();
      } finally {
        server.close();
      }
    } finally {
      await rm(caDir, { recursive: true, force: true });
    }
  });
});
