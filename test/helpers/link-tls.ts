/**
 * The TLS material of the runner link in tests, as a deployment has it: a deployment CA (in memory),
 * whose certificate runners require of their client, and the API server's certificate of that CA.
 */
import { createEphemeralCa, type DeploymentCa } from '../../egress-proxy/deployment-ca.js';
import { API_SERVER_NAME } from '../../runner/link-tls.js';

export interface LinkTls {
  ca: DeploymentCa;
  /** What a runner's ACIS_RUNNER_TLS_CA_FILE holds. */
  clientCa: string;
  /** The API server's client certificate and key. */
  apiCertificate: () => { cert: string; key: string };
}

export async function linkTls(): Promise<LinkTls> {
  const ca = await createEphemeralCa('ACIS test deployment CA');
  const leaf = await ca.issueIdentity({ commonName: API_SERVER_NAME, usages: ['client'], validityMs: 3_600_000 });
  const certificate = { cert: leaf.certPem, key: leaf.keyPem };
  return { ca, clientCa: ca.certPem, apiCertificate: () => certificate };
}
