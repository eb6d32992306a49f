/**
 * Runs for the standalone proxy, read from a JSON file (ACIS_EGRESS_RUNS_FILE):
 * `{"<runner_id>": {"token": "<runner token>", "secrets": {"ALIAS": "value", "BOUND": {"value": "...",
 * "allowed_hosts": ["api.example.com"]}}}}`: a runner credential and the values its requests get.
 *
 * This is the development and demo source of runs: the file holds plaintext values, so keep it 0600 and
 * short-lived. Inside the service the API server hands `createEgressProxy` a resolver over its live runs.
 * The file is re-read when its modification time changes (looked at once a second), so runs can be added
 * while the proxy serves.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { z } from 'zod';
import type { ResolvedRun, RunCredential } from './egress-proxy.js';
import { WireSecretsSchema, fromWireSecrets } from './resolve-protocol.js';

const RunsFileSchema = z.record(z.string().min(1), z.object({ token: z.string().min(1), secrets: WireSecretsSchema }));

interface Run {
  tokenDigest: Buffer;
  /** The same object at every request (the proxy keys its masking tables by its map); no request id. */
  resolved: ResolvedRun;
}

const digest = (text: string) => createHash('sha256').update(text).digest();

/** How long a read of the file is trusted before its modification time is looked at again. */
const RECHECK_MS = 1000;

export function createRunsFileResolver(file: string): (credential: RunCredential) => Promise<ResolvedRun | undefined> {
  let loaded: { mtimeMs: number; checkedAt: number; runs: Map<string, Run> } | undefined;
  const load = async (): Promise<Map<string, Run>> => {
    // One stat a second at most, not one per request: this sits on every request's path.
    if (loaded && performance.now() - loaded.checkedAt < RECHECK_MS) return loaded.runs;
    const { mtimeMs } = await stat(file);
    if (loaded?.mtimeMs === mtimeMs) loaded.checkedAt = performance.now();
    else {
      const parsed = RunsFileSchema.parse(JSON.parse(await readFile(file, 'utf8')));
      const runs = new Map<string, Run>();
      for (const [runnerId, run] of Object.entries(parsed)) {
        runs.set(runnerId, { tokenDigest: digest(run.token), resolved: { secrets: fromWireSecrets(run.secrets) } });
      }
      loaded = { mtimeMs, checkedAt: performance.now(), runs };
    }
    return loaded.runs;
  };
  return async ({ runnerId, token }) => {
    const run = (await load()).get(runnerId);
    // Digests have one length, so the comparison takes the same time whatever the token.
    return run && timingSafeEqual(run.tokenDigest, digest(token)) ? run.resolved : undefined;
  };
}
