/**
 * The sync Job's side of the sync report listener: one POST over HTTPS (TLS 1.3) that trusts the
 * deployment CA alone (not the system roots) and checks that the listener's certificate names the
 * URL's host, before the attempt's token is sent. Fail-safe direction: a listener that cannot prove
 * itself gets nothing, and the attempt fails with the reason; nothing falls back to plain HTTP.
 */
import { request } from 'node:https';

/** How long one hand-over may take (a result is up to hundreds of MiB). */
const CALL_TIMEOUT_MS = 120_000;
/** Answers are an outcome or a problem document: anything larger is not the listener's. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** The listener's certificate was not proven (not of the deployment CA, or not naming the host dialled): retrying cannot help. */
export class ReportListenerUntrusted extends Error {}

export interface ReportAnswer {
  status: number;
  body: { state?: string; commit?: string; error?: string; type?: string };
}

export function postReport(url: URL, token: string, body: string, caPem: string): Promise<ReportAnswer> {
  if (url.protocol !== 'https:') return Promise.reject(new Error('the sync report URL must be https: the listener speaks TLS only'));
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        ca: caPem,
        minVersion: 'TLSv1.3',
        agent: false,
        timeout: CALL_TIMEOUT_MS,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) req.destroy(new Error('the answer is too large'));
          else chunks.push(chunk);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: parsed(Buffer.concat(chunks).toString('utf8')) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${CALL_TIMEOUT_MS} ms`)));
    req.on('error', (error: NodeJS.ErrnoException) => reject(untrusted(error) ?? error));
    req.end(body);
  });
}

function parsed(text: string): ReportAnswer['body'] {
  try {
    return JSON.parse(text) as ReportAnswer['body'];
  } catch {
    return {};
  }
}

/** A certificate failure, said as one; undefined for any other error (a refused or reset connection). */
function untrusted(error: NodeJS.ErrnoException): ReportListenerUntrusted | undefined {
  const code = error.code ?? '';
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID' || /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER/.test(code)) {
    return new ReportListenerUntrusted(`the sync report listener's certificate was refused (${code}): ${error.message}`);
  }
  return undefined;
}
