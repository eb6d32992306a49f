/**
 * The runner's hand-encoded certificate is one node:crypto (OpenSSL) reads as X.509: its names,
 * dates and key as asked, signed by that key, and served by a TLS 1.3 listener.
 */
import { once } from 'node:events';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { connect, createServer } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { selfSignedCertificate } from '../../runner/self-signed.js';

describe('selfSignedCertificate', () => {
  it('is a self-signed P-256 certificate of the name, valid from a day ago for the days asked, with its key', () => {
    const now = new Date('2026-11-29T12:00:00.000Z');
    const { cert, key } = selfSignedCertificate('acis-runner', 365, now);
    const x509 = new X509Certificate(cert);
    expect(x509.subject).toBe('CN=acis-runner');
    expect(x509.issuer).toBe('CN=acis-runner');
    expect(new Date(x509.validFrom).toISOString()).toBe('2026-11-28T12:00:00.000Z');
    expect(new Date(x509.validTo).toISOString()).toBe('2027-11-29T12:00:00.000Z');
    expect(x509.publicKey.asymmetricKeyDetails).toMatchObject({ namedCurve: 'prime256v1' });
    expect(x509.checkPrivateKey(createPrivateKey(key))).toBe(true);
    expect(x509.verify(x509.publicKey)).toBe(true);
    expect(x509.serialNumber).toMatch(/^[0-9A-F]{32}$/);
  });

  it('encodes dates from 2050 on as GeneralizedTime, and long names with long-form lengths', () => {
    const name = 'n'.repeat(200);
    const x509 = new X509Certificate(selfSignedCertificate(name, 30, new Date('2049-12-20T00:00:00.000Z')).cert);
    expect(x509.subject).toBe(`CN=${name}`);
    expect(new Date(x509.validTo).toISOString()).toBe('2050-01-19T00:00:00.000Z');
  });

  it('differs on every call (key and serial) and serves TLS 1.3', async () => {
    const first = selfSignedCertificate('acis-runner', 1);
    const second = selfSignedCertificate('acis-runner', 1);
    expect(first.key).not.toBe(second.key);
    expect(new X509Certificate(first.cert).serialNumber).not.toBe(new X509Certificate(second.cert).serialNumber);
    const server = createServer({ ...first, minVersion: 'TLSv1.3' }, (socket) => socket.end('hello'));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const socket = connect({
        host: '127.0.0.1',
        port: (server.address() as AddressInfo).port,
        ca: first.cert,
        servername: 'acis-runner',
        checkServerIdentity: () => undefined,
      });
      const [data] = await once(socket, 'data');
      expect(String(data)).toBe('hello');
      expect(socket.authorized).toBe(true);
      expect(socket.getProtocol()).toBe('TLSv1.3');
      socket.destroy();
    } finally {
      server.close();
    }
  });
});
