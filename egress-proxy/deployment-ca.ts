/**
 * The deployment CA of the egress proxy: runners trust it, and the proxy presents leaf certificates it signs
 * for the hosts they reach over HTTPS, so it can see (and substitute in) their requests.
 *
 * Invariants:
 * - One CA per deployment, generated on first start into `dir` (ca.crt 0644, ca.key 0600, dir 0700) and
 *   reused afterwards, so runners' trust survives restarts. Generation is atomic (written aside, then one
 *   rename), so two proxies starting together end up with the same CA.
 * - The CA key never leaves this module's process; only the certificate is handed out.
 * - Leaf certificates are minted per host name on demand (one shared leaf key pair per process), cached,
 *   and re-minted before they expire.
 * - Identities (`issueIdentity`: the API server's and the proxy's own, for the in-cluster TLS links) get a
 *   key pair of their own each, never the one the proxy's forged leaves share.
 *
 * ECDSA P-256 through WebCrypto: key generation and signing are native and take milliseconds, where RSA
 * generation in JavaScript takes seconds.
 */
import 'reflect-metadata'; // @peculiar/x509 resolves its parsers through tsyringe, which needs this polyfill
import * as x509 from '@peculiar/x509';
import { X509Certificate, createPrivateKey, randomBytes, webcrypto } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import path from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;
const CA_VALIDITY_DAYS = 3650;
const LEAF_VALIDITY_DAYS = 30;
/** A cached leaf this close to expiry is minted again. */
const LEAF_RENEW_BEFORE_MS = DAY_MS;
/** Host names kept in the leaf cache; the least recently used goes first. */
const LEAF_CACHE_SIZE = 1000;
/** Back-dating absorbs clock skew between the proxy and its clients. */
const BACKDATE_MS = 3_600_000;

export interface LeafCertificate {
  certPem: string;
  keyPem: string;
  notAfter: Date;
}

/** A certificate a component of the deployment presents as itself (TLS server, client, or both). */
export interface IdentityRequest {
  commonName: string;
  /** DNS names (SANs) beside the common name, which is one too. */
  dnsNames?: readonly string[];
  usages: ReadonlyArray<'server' | 'client'>;
  validityMs: number;
}

export interface DeploymentCa {
  readonly certPem: string;
  /** A certificate and fresh key for a component's identity, signed by this CA. */
  issueIdentity(request: IdentityRequest): Promise<LeafCertificate>;
  /** A leaf for `host` (a DNS name or IP literal) signed by this CA. */
  issueLeaf(host: string): Promise<LeafCertificate>;
  /** The TLS context presenting the cached leaf for `host`. */
  secureContextFor(host: string): Promise<SecureContext>;
}

interface CaMaterial {
  cert: x509.X509Certificate;
  certPem: string;
  key: CryptoKey;
}

/** Loads the CA in `dir`, generating it there first if there is none. */
export async function loadOrCreateDeploymentCa(dir: string, now: () => Date = () => new Date()): Promise<DeploymentCa> {
  const material = (await loadCa(dir)) ?? (await generateInto(dir, now));
  return deploymentCa(material, now);
}

/** A CA kept in memory only (tests, benchmarks, throwaway upstreams). */
export async function createEphemeralCa(commonName: string, now: () => Date = () => new Date()): Promise<DeploymentCa> {
  return deploymentCa(await generateCa(commonName, now), now);
}

async function loadCa(dir: string): Promise<CaMaterial | undefined> {
  let certPem: string;
  let keyPem: string;
  try {
    [certPem, keyPem] = await Promise.all([readFile(path.join(dir, 'ca.crt'), 'utf8'), readFile(path.join(dir, 'ca.key'), 'utf8')]);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  // A mismatched pair would mint leaves no client can verify; fail at start, not on every handshake.
  if (!new X509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem))) {
    throw new Error(`egress CA in ${dir}: ca.key does not belong to ca.crt`);
  }
  const der = createPrivateKey(keyPem).export({ format: 'der', type: 'pkcs8' });
  const key = await webcrypto.subtle.importKey('pkcs8', der, ALGORITHM, false, ['sign']);
  return { cert: new x509.X509Certificate(certPem), certPem, key: key as CryptoKey };
}

async function generateInto(dir: string, now: () => Date): Promise<CaMaterial> {
  await mkdir(path.dirname(dir), { recursive: true });
  const staging = `${dir}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  const material = await generateCa('ACIS egress proxy CA', now, true);
  await mkdir(staging, { mode: 0o700 });
  try {
    const keyDer = await webcrypto.subtle.exportKey('pkcs8', material.key);
    const keyPem = x509.PemConverter.encode(keyDer, 'PRIVATE KEY');
    await writeFile(path.join(staging, 'ca.key'), keyPem, { mode: 0o600 });
    await writeFile(path.join(staging, 'ca.crt'), material.certPem, { mode: 0o644 });
    await rename(staging, dir);
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    const code = (err as NodeJS.ErrnoException).code;
    // Another process renamed its CA into place first: use that one.
    if (code === 'ENOTEMPTY' || code === 'EEXIST') {
      const winner = await loadCa(dir);
      if (winner) return winner;
    }
    throw err;
  }
  return material;
}

async function generateCa(commonName: string, now: () => Date, extractable = false): Promise<CaMaterial> {
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, extractable, ['sign', 'verify']);
  const start = now().getTime();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: [{ CN: [commonName] }, { O: ['ACIS'] }],
    notBefore: new Date(start - BACKDATE_MS),
    notAfter: new Date(start + CA_VALIDITY_DAYS * DAY_MS),
    keys: keys as CryptoKeyPair,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey as CryptoKey),
    ],
  });
  return { cert, certPem: cert.toString('pem'), key: keys.privateKey as CryptoKey };
}

function deploymentCa(ca: CaMaterial, now: () => Date): DeploymentCa {
  // One leaf key pair for every host: minting is then a signature, not a key generation.
  const leafKeys = (async () => {
    const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
    const pem = x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY');
    return { keys, pem };
  })();
  const cache = new Map<string, Promise<{ leaf: LeafCertificate; context: SecureContext }>>();

  const issueLeaf = async (host: string): Promise<LeafCertificate> => {
    const { keys, pem } = await leafKeys;
    const spec = {
      subject: [{ CN: [host] }],
      names: [host],
      usages: [x509.ExtendedKeyUsage.serverAuth],
      validityMs: LEAF_VALIDITY_DAYS * DAY_MS,
    };
    const cert = await signLeaf(ca, keys, spec, now);
    return { certPem: cert.toString('pem'), keyPem: pem, notAfter: cert.notAfter };
  };

  const secureContextFor = async (host: string): Promise<SecureContext> => {
    const cached = cache.get(host);
    if (cached) {
      const entry = await cached.catch(() => undefined);
      if (entry && entry.leaf.notAfter.getTime() - now().getTime() > LEAF_RENEW_BEFORE_MS) {
        cache.delete(host); // re-inserted below: most recently used goes last
        cache.set(host, cached);
        return entry.context;
      }
      cache.delete(host);
    }
    const minting = issueLeaf(host).then((leaf) => ({
      leaf,
      context: createSecureContext({ cert: `${leaf.certPem}\n${ca.certPem}`, key: leaf.keyPem }),
    }));
    cache.set(host, minting);
    minting.catch(() => cache.delete(host));
    if (cache.size > LEAF_CACHE_SIZE) cache.delete(cache.keys().next().value!);
    return (await minting).context;
  };

  return { certPem: ca.certPem, issueLeaf, secureContextFor, issueIdentity: (request) => issueIdentity(ca, request, now) };
}

async function issueIdentity(ca: CaMaterial, request: IdentityRequest, now: () => Date): Promise<LeafCertificate> {
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = await signLeaf(
    ca,
    keys,
    {
      subject: [{ CN: [request.commonName] }, { O: ['ACIS'] }],
      names: [...new Set([request.commonName, ...(request.dnsNames ?? [])])],
      usages: request.usages.map((usage) => (usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth)),
      validityMs: request.validityMs,
    },
    now,
  );
  const keyPem = x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY');
  return { certPem: cert.toString('pem'), keyPem, notAfter: cert.notAfter };
}

/** What a leaf of the CA says: its subject, the names (DNS or IP) it is for, its uses and how long it lasts. */
interface LeafSpec {
  subject: x509.X509CertificateCreateParamsName;
  names: string[];
  usages: x509.ExtendedKeyUsageType[];
  validityMs: number;
}

/** A leaf certificate for `keys`, signed by the CA, backdated a little and ending no later than the CA. */
async function signLeaf(ca: CaMaterial, keys: CryptoKeyPair, spec: LeafSpec, now: () => Date): Promise<x509.X509Certificate> {
  const start = now().getTime();
  return x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject: spec.subject,
    issuer: ca.cert.subjectName,
    notBefore: new Date(start - BACKDATE_MS),
    notAfter: new Date(Math.min(start + spec.validityMs, ca.cert.notAfter.getTime())),
    publicKey: keys.publicKey,
    signingKey: ca.key,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension(spec.usages),
      new x509.SubjectAlternativeNameExtension(spec.names.map((value) => ({ type: isIP(value) === 0 ? 'dns' : 'ip', value }))),
      await authorityKeyIdentifier(ca.cert),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
}

/**
 * Leaves name the CA's own subject key identifier: verifiers match it against the CA's, and a CA made
 * elsewhere may derive it differently (the Go behind Helm 4's `genCAWithKey` hashes the key with
 * truncated SHA-256 where this library would use SHA-1). Computed only for a CA that carries none.
 */
async function authorityKeyIdentifier(cert: x509.X509Certificate): Promise<x509.AuthorityKeyIdentifierExtension> {
  const subjectKeyId = cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
  return subjectKeyId ? new x509.AuthorityKeyIdentifierExtension(subjectKeyId) : x509.AuthorityKeyIdentifierExtension.create(cert);
}

/** 16 random bytes, high bit cleared so the DER integer stays positive. */
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f;
  return bytes.toString('hex');
}
