/**
 * What makes the link (link.ts) a mutually authenticated, encrypted channel: TLS, and inside it proofs
 * bound to the TLS session.
 *
 * - The runner serves TLS with a certificate it makes at start (self-signed, in memory only) and
 *   admits only a client whose certificate chains to the deployment's CA and names the API server
 *   (`API_SERVER_NAME`): nothing else gets to send a hello.
 * - Neither side sends the per-sandbox token. Each proves it holds it with an HMAC, keyed by the token,
 *   of its role's label and keying material exported from this TLS session (RFC 5705/8446 §7.5):
 *   the API side in `hello`, the runner in `welcome`. A proof is worthless on any other session (no
 *   replay), a man in the middle holds two sessions with two different exports (no relaying), and
 *   the API side does not need to trust the runner's certificate: only a holder of the token can
 *   answer its hello with a welcome proof for this session.
 * Fail-safe direction: a proof that does not verify is a refusal, never a fallback to anything weaker.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import { selfSignedCertificate } from './self-signed.js';

/** The name (certificate CN or DNS SAN) the runner requires of its client's certificate. */
export const API_SERVER_NAME = 'acis-api-server';

/** Who proves: the API side in its hello, the runner in its welcome. Distinct labels, so neither proof passes for the other. */
export type ProofRole = 'hello' | 'welcome';

const EXPORTER_LABEL = 'EXPORTER-acis-runner-link';
const EXPORTED_BYTES = 32;
/** The runner's certificate outlives any pod; nobody verifies it by chain, so its dates only need to be plausible. */
const CERTIFICATE_DAYS = 365;

/** Keying material both ends of one TLS session derive alike, and no other session shares. */
export function sessionBinding(socket: TLSSocket): Buffer {
  return socket.exportKeyingMaterial(EXPORTED_BYTES, EXPORTER_LABEL, Buffer.alloc(0));
}

/** The proof that the sender of `role`'s line holds `token`, for the session `binding` came from (base64url). */
export function linkProof(token: string, role: ProofRole, binding: Buffer): string {
  return createHmac('sha256', token).update(`acis-link ${role}\n`).update(binding).digest('base64url');
}

/** Whether `proof` is `role`'s proof of `token` on this session; compared in constant time. */
export function proofMatches(token: string, role: ProofRole, binding: Buffer, proof: string): boolean {
  const expected = Buffer.from(linkProof(token, role, binding));
  const given = Buffer.from(proof);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** A certificate and key for the runner's listener, made now and kept in memory (PEM). */
export function ephemeralCertificate(commonName: string): { cert: string; key: string } {
  return selfSignedCertificate(commonName, CERTIFICATE_DAYS);
}
