/**
 * A self-signed X.509 certificate (ECDSA P-256, SHA-256) made with node:crypto alone, DER-encoded by
 * hand: the runner needs one on every start, and an X.509 library's import took longer than the
 * Agent SDK's (1.4 s against 0.7 s on a loaded 2-core machine), on the path to a cold sandbox's
 * first turn. Only what a TLS server certificate needs (RFC 5280 §4.1): version 3, a random serial,
 * one common name as issuer and subject, the validity, the public key; no extensions (nobody
 * verifies it by chain: the link authenticates the runner by its token proof).
 */
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';

const ECDSA_WITH_SHA256 = Buffer.from('06082a8648ce3d040302', 'hex'); // 1.2.840.10045.4.3.2
const COMMON_NAME = Buffer.from('0603550403', 'hex'); // 2.5.4.3

/** A certificate of `commonName` valid from a day ago for `days` days, and its key (PEM). */
export function selfSignedCertificate(commonName: string, days: number, now = new Date()): { cert: string; key: string } {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const name = sequence(set(sequence(COMMON_NAME, tlv(0x0c, Buffer.from(commonName, 'utf8')))));
  const algorithm = sequence(ECDSA_WITH_SHA256);
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x01; // positive and of full length
  const dayMs = 86_400_000;
  const tbs = sequence(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))), // [0] EXPLICIT version v3
    tlv(0x02, serial),
    algorithm,
    name,
    sequence(time(new Date(now.getTime() - dayMs)), time(new Date(now.getTime() + days * dayMs))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
  );
  // node:crypto signs EC keys in DER (dsaEncoding 'der'), as X.509 wants.
  const signature = sign('sha256', tbs, privateKey);
  const der = sequence(tbs, algorithm, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));
  const body = der.toString('base64').replace(/.{64}/g, '$&\n').replace(/\n$/, '');
  return {
    cert: `-----BEGIN CERTIFICATE-----\n${body}\n-----END CERTIFICATE-----\n`,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

/** UTCTime through 2049, GeneralizedTime after (RFC 5280 §4.1.2.5). */
function time(date: Date): Buffer {
  const iso = date.toISOString().replace(/[-:T]/g, '').slice(0, 14); // YYYYMMDDHHMMSS
  return date.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`)) : tlv(0x18, Buffer.from(`${iso}Z`));
}

function sequence(...parts: Buffer[]): Buffer {
  return tlv(0x30, Buffer.concat(parts));
}

function set(...parts: Buffer[]): Buffer {
  return tlv(0x31, Buffer.concat(parts));
}

/** One DER tag-length-value (definite lengths up to 65535 bytes: a certificate is far smaller). */
function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  const length = n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : [0x82, n >> 8, n & 0xff];
  return Buffer.concat([Buffer.from([tag, ...length]), content]);
}
