/**
 * GitHub push webhooks: a push to a registered repository's branch queues its sync, so hosts need not
 * call the sync endpoint by hand.
 *
 * Who may call: whoever signs the body (X-Hub-Signature-256, HMAC-SHA256) with a webhook secret of
 * an integration that registered a repository at the pushed URL. Secrets are credentials of type
 * `github_webhook_secret` in that integration's registry (several may coexist while one is rotated).
 * Each candidate secret is checked in constant time by @octokit/webhooks; only the repositories of
 * integrations whose secret verifies are touched. No valid signature: 401, and nothing is recorded
 * or queued.
 *
 * Replays: the delivery id header is not signed, so a push is remembered by the digest of its signed
 * body (recorded only after the signature verified, so a forged request cannot burn a real one) for
 * REPLAY_WINDOW_MS, and a push whose signed `repository.pushed_at` is older than that window (or
 * absent) is not acted on: a captured delivery sent again, under any id, queues nothing.
 */
import { createHash } from 'node:crypto';
import { Webhooks } from '@octokit/webhooks';
import type { AppDeps } from '../deps.js';
import { ProblemError } from '../core/problems.js';
import { findCredentialCiphertextsOfType } from '../credentials/credentials.repository.js';
import { credentialSecretContext } from '../credentials/credentials.service.js';
import { findRepositoriesByUrls } from '../repositories/repositories.repository.js';
import type { GitHubDeliveryBody, WebhookReceipt } from './webhooks.schemas.js';
import { REPLAY_WINDOW_MS, recordDelivery } from './webhooks.repository.js';

export const WEBHOOK_SECRET_CREDENTIAL = 'github_webhook_secret';
const NULL_COMMIT = /^0+$/;

export interface GitHubDelivery {
  event: string;
  deliveryId: string | undefined;
  signature: string | undefined;
  /** The body exactly as received: the signature is over these bytes. */
  rawBody: string;
  payload: GitHubDeliveryBody;
}

export async function receiveGitHubDelivery(deps: AppDeps, delivery: GitHubDelivery): Promise<WebhookReceipt> {
  if (!delivery.signature) throw signatureInvalid('Send X-Hub-Signature-256: the body signed with the webhook secret.');
  const candidates = await findRepositoriesByUrls(deps.db, remoteUrlVariants(delivery.payload.repository));
  const verified = await integrationsVerifying(deps, [...new Set(candidates.map((r) => r.integration_id))], delivery);
  if (verified.size === 0) {
    throw signatureInvalid('The signature matches no webhook secret of an integration with a repository at this URL.');
  }
  const repositories = candidates.filter((repository) => verified.has(repository.integration_id));
  const receipt = (outcome: WebhookReceipt['outcome'], syncsQueued: number, detail: string): WebhookReceipt => ({
    object: 'webhook_delivery',
    delivery_id: delivery.deliveryId ?? null,
    event: delivery.event,
    outcome,
    syncs_queued: syncsQueued,
    detail,
  });
  if (delivery.event === 'ping') return receipt('pong', 0, `${repositories.length} registered repositories at this URL`);
  if (delivery.event !== 'push') return receipt('ignored', 0, `${delivery.event} events are not acted on`);
  if (!pushedWithinReplayWindow(delivery.payload, deps.now())) {
    return receipt('ignored', 0, 'a push without repository.pushed_at, or pushed before the replay window (7 days), is not acted on');
  }
  const bodyDigest = createHash('sha256').update(delivery.rawBody).digest('hex');
  if (!(await recordDelivery(deps.db, bodyDigest, deps.now()))) return receipt('duplicate', 0, 'this delivery was received before');
  const { ref, after, deleted } = delivery.payload;
  const branch = ref?.startsWith('refs/heads/') ? ref.slice('refs/heads/'.length) : undefined;
  if (!branch || deleted || !after || NULL_COMMIT.test(after)) return receipt('ignored', 0, 'not a push of a branch head');
  const onBranch = repositories.filter((repository) => repository.branch === branch);
  if (onBranch.length === 0) return receipt('ignored', 0, `no registered repository follows ${branch}`);
  let queued = 0;
  for (const repository of onBranch) {
    // Already synced at the pushed commit (a sync that ran since, or a push of nothing new).
    if (repository.sync_commit === after && repository.sync_state !== 'syncing') continue;
    if (await deps.repositorySync.requestSync(repository.id)) queued += 1;
  }
  deps.logger.info({ delivery_id: delivery.deliveryId, branch, syncs_queued: queued }, 'github push received');
  return queued > 0
    ? receipt('queued', queued, `sync queued for ${queued} repositories`)
    : receipt('up_to_date', 0, 'already synced at this commit');
}

/** `repository.pushed_at` of a push: unix seconds (as GitHub sends it in push events) or an ISO time. */
function pushedWithinReplayWindow(payload: GitHubDeliveryBody, now: Date): boolean {
  const pushedAt = payload.repository?.pushed_at;
  const time = typeof pushedAt === 'number' ? pushedAt * 1000 : typeof pushedAt === 'string' ? Date.parse(pushedAt) : Number.NaN;
  return Number.isFinite(time) && now.getTime() - time < REPLAY_WINDOW_MS;
}

/** The integrations (of those given) one of whose webhook secrets verifies the delivery's signature. */
async function integrationsVerifying(deps: AppDeps, integrationIds: string[], delivery: GitHubDelivery): Promise<Set<string>> {
  const secrets = await findCredentialCiphertextsOfType(deps.db, integrationIds, WEBHOOK_SECRET_CREDENTIAL);
  const verified = new Set<string>();
  for (const row of secrets) {
    if (verified.has(row.integration_id)) continue;
    const secret = deps.vault.decrypt(row.secret_ciphertext, credentialSecretContext(row.id));
    if (await new Webhooks({ secret }).verify(delivery.rawBody, delivery.signature!).catch(() => false)) verified.add(row.integration_id);
  }
  return verified;
}

/**
 * Every spelling a host may have registered the pushed repository under, lower-cased without a
 * trailing slash: https (and http, for a GitHub Enterprise without TLS) with and without `.git`,
 * and SSH in both of git's forms.
 */
export function remoteUrlVariants(repository: GitHubDeliveryBody['repository']): string[] {
  const variants = new Set<string>();
  const urls = [repository?.clone_url, repository?.html_url, repository?.ssh_url, repository?.git_url];
  for (const url of urls) {
    const location = hostAndPath(url);
    if (!location) continue;
    const { host, path } = location;
    const bareHost = host.replace(/:\d+$/, '');
    for (const suffix of ['', '.git']) {
      variants.add(`https://${host}/${path}${suffix}`);
      variants.add(`http://${host}/${path}${suffix}`);
      variants.add(`git@${bareHost}:${path}${suffix}`);
      variants.add(`ssh://git@${bareHost}/${path}${suffix}`);
    }
  }
  return [...variants];
}

function hostAndPath(url: string | undefined): { host: string; path: string } | undefined {
  if (!url) return undefined;
  const scp = /^[\w.-]+@([\w.-]+):(.+)$/.exec(url);
  let host: string;
  let path: string;
  if (scp) {
    host = scp[1]!;
    path = scp[2]!;
  } else {
    try {
      const parsed = new URL(url);
      host = parsed.host;
      path = parsed.pathname;
    } catch {
      return undefined;
    }
  }
  path = path
    .replace(/^\/+/, '')
    .replace(/\/+$/, '')
    .replace(/\.git$/, '');
  return path ? { host: host.toLowerCase(), path: path.toLowerCase() } : undefined;
}

function signatureInvalid(detail: string): ProblemError {
  return new ProblemError('webhook-signature-invalid', 401, { detail });
}
