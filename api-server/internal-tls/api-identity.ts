/**
 * The API server's identity on the in-cluster TLS links: a certificate of the deployment CA naming
 * `acis-api-server` (the name runners require of their client, runner/link-tls.ts) and, for the egress
 * resolve and sync report listeners, the DNS names proxies and sync Jobs reach them by. Issued at
 * start, in memory only, short-lived and renewed well before it lapses; readers take `current()` at
 * each use, listeners hear of renewals.
 * Fail-safe direction: a failed renewal keeps the valid certificate and is retried; nothing falls back
 * to a connection without one.
 */
import type { Logger } from 'pino';
import type { DeploymentCa } from '../../egress-proxy/deployment-ca.js';
import { API_SERVER_NAME } from '../../runner/link-tls.js';

const HOUR_MS = 3_600_000;
/** Short enough that a copied key is soon worthless, long enough to ride out a CA-less hour. */
const VALIDITY_MS = 7 * 24 * HOUR_MS;
const RENEW_EVERY_MS = 24 * HOUR_MS;
const RETRY_MS = HOUR_MS;

export interface TlsIdentity {
  cert: string;
  key: string;
}

export interface ApiIdentity {
  /** The deployment CA's certificate (PEM): what the API server requires of its own clients. */
  readonly caPem: string;
  current(): TlsIdentity;
  onRenewed(listener: (identity: TlsIdentity) => void): void;
  stop(): void;
}

export async function startApiIdentity(ca: DeploymentCa, dnsNames: readonly string[], logger: Logger): Promise<ApiIdentity> {
  const issue = async (): Promise<TlsIdentity> => {
    const leaf = await ca.issueIdentity({ commonName: API_SERVER_NAME, dnsNames, usages: ['server', 'client'], validityMs: VALIDITY_MS });
    return { cert: `${leaf.certPem}\n${ca.certPem}`, key: leaf.keyPem };
  };
  let identity = await issue();
  const listeners: Array<(identity: TlsIdentity) => void> = [];
  let timer: NodeJS.Timeout | undefined;
  const schedule = (ms: number) => {
    timer = setTimeout(renew, ms);
    timer.unref();
  };
  const renew = () => {
    issue().then(
      (fresh) => {
        identity = fresh;
        for (const listener of listeners) listener(fresh);
        schedule(RENEW_EVERY_MS);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'renewing the API server certificate failed; the current one is kept and renewal retried');
        schedule(RETRY_MS);
      },
    );
  };
  schedule(RENEW_EVERY_MS);
  return {
    caPem: ca.certPem,
    current: () => identity,
    onRenewed: (listener) => listeners.push(listener),
    stop: () => clearTimeout(timer),
  };
}
