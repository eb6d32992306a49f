/**
 * Under Kubernetes a claimed sync runs as a Job: the API server writes the attempt's credential
 * Secret (`<name>-credential-<generation>`: the token the Job hands its result back with, derived
 * for this attempt alone (sync-report.ts), and what git authenticates with, for a GitHub App an
 * installation token minted here, never the App's key), then creates the RepositorySync or bumps its
 * `requestGeneration` with the attempt's claim. The controller starts the Job, mounts that Secret
 * into its pod only, and deletes it once the Job has ended (controller/reposync-*.ts). The API server
 * never creates pods.
 *
 * The bump is a replace conditioned on the resourceVersion read; when it loses (a status write, or
 * another node's bump) it reads again and retries, unless its claim is no longer current.
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  GROUP,
  REPOSITORY_SYNC,
  type RepositorySync,
  type RepositorySyncSettings,
  SYNC_CREDENTIAL_KEY,
  SYNC_TOKEN_KEY,
  syncCredentialSecretName,
  VERSION,
} from '../../controller/api/v1alpha1.js';
import { loadKubeConfig } from '../../kube/cluster-access.js';
import { httpStatus } from '../../kube/kube-errors.js';
import type { Config } from '../config.js';
import type { Db } from '../core/db/database.js';
import { deliveredCredential, type GitCredentialSource } from './git-credentials.js';
import { isCurrentSync, type RepositoryRow } from './repositories.repository.js';
import type { SyncDispatch } from './sync-dispatch.js';
import { syncReportToken } from './sync-report.js';

/** Rounds of read-then-replace before a hand-over gives up. */
const BUMP_ATTEMPTS = 5;

/** A repository's RepositorySync name: its id as a DNS label (`rep_01ABC` → `rep-01abc`). */
export function repositorySyncName(repositoryId: string): string {
  return repositoryId.toLowerCase().replace(/_/g, '-');
}

export interface KubernetesSyncDispatchDeps {
  db: Db;
  namespace: string;
  gitCredential: GitCredentialSource;
  logger: Logger;
  /** A kubeconfig file (KUBECONFIG); absent: the in-cluster service account. */
  kubeconfigPath: string | undefined;
  /** The controller's Job deadline plus the longest git command: an attempt older than this is orphaned. */
  attemptDeadlineMs: number;
  /** What the attempt needs of this process's configuration (syncAttemptSettings), written into every request. */
  settings: RepositorySyncSettings;
  /** The key attempts' report tokens are derived with (the sync report listener checks them with the same). */
  reportTokenKey: Buffer;
}

/** The settings a sync attempt runs with, from the API server's configuration: the one place a sync Job's settings come from. */
export function syncAttemptSettings(
  config: Pick<Config, 'allowFileRepos' | 'allowPlainRepos' | 'repositoryAllow' | 'syncTimeoutSeconds'>,
): RepositorySyncSettings {
  return {
    allowFileRepos: config.allowFileRepos,
    allowPlainRepos: config.allowPlainRepos,
    ...(config.repositoryAllow !== undefined && { repositoryAllow: config.repositoryAllow }),
    timeoutSeconds: config.syncTimeoutSeconds,
  };
}

export function kubernetesSyncDispatch(deps: KubernetesSyncDispatchDeps): SyncDispatch {
  const syncs = new RepositorySyncs(loadKubeConfig(deps.kubeconfigPath), deps.namespace);
  return {
    attemptDeadlineMs: deps.attemptDeadlineMs,
    hand: (repository, claim) => handOver(deps, syncs, repository, claim),
    async failureOf(repositoryId: string, claim: string) {
      const sync = await syncs.read(repositorySyncName(repositoryId));
      if (!sync || sync.spec.claim !== claim || sync.status?.observedRequestGeneration !== sync.spec.requestGeneration) return undefined;
      return sync.status.state === 'error' ? (sync.status.error ?? 'the sync job failed') : undefined;
    },
    // Its Jobs, their pods and the credential Secrets are owned by it and go with it.
    forget: (repositoryId) => syncs.delete(repositorySyncName(repositoryId)),
  };
}

/** Hands a claimed attempt to the cluster: the first generation's create, or the next generation's bump. */
async function handOver(deps: KubernetesSyncDispatchDeps, syncs: RepositorySyncs, repository: RepositoryRow, claim: string): Promise<void> {
  const name = repositorySyncName(repository.id);
  const resolved = await deps.gitCredential(repository);
  const data: Record<string, string> = {
    [SYNC_TOKEN_KEY]: syncReportToken(deps.reportTokenKey, repository.id, claim),
    ...(resolved && { [SYNC_CREDENTIAL_KEY]: deliveredCredential(resolved) }),
  };
  for (let round = 0; round < BUMP_ATTEMPTS; round++) {
    const existing = await syncs.read(name);
    if (!existing) {
      // The first generation: the Secret needs its owner's uid, so it follows the create (the Job's pod waits for it).
      const created = await syncs.create(name, specOf(repository, claim, 1, deps.settings));
      if (!created) continue;
      await syncs.writeCredential(created, syncCredentialSecretName(name, 1), data);
      return logHanded(deps.logger, repository.id, name, 1);
    }
    const generation = existing.spec.requestGeneration + 1;
    // Written before the bump, under this generation's own name: the controller deletes only ended generations' Secrets.
    await syncs.writeCredential(existing, syncCredentialSecretName(name, generation), data);
    const replaced = await syncs.replace({ ...existing, spec: specOf(repository, claim, generation, deps.settings) });
    if (replaced) return logHanded(deps.logger, repository.id, name, generation);
    if (!(await isCurrentSync(deps.db, repository.id, claim))) {
      deps.logger.info({ repository_id: repository.id }, 'sync hand-over dropped: its claim was superseded meanwhile');
      return;
    }
  }
  throw new Error(`the RepositorySync ${name} kept changing; the sync was not handed over`);
}

/** The RepositorySyncs of one namespace and their credential Secrets, as the API server writes them. */
class RepositorySyncs {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly common: { group: string; version: string; namespace: string; plural: string };

  constructor(
    kubeConfig: KubeConfig,
    private readonly namespace: string,
  ) {
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.common = { group: GROUP, version: VERSION, namespace, plural: REPOSITORY_SYNC.plural };
  }

  async read(name: string): Promise<RepositorySync | undefined> {
    return (await this.custom.getNamespacedCustomObject({ ...this.common, name }).catch((error: unknown) => {
      if (httpStatus(error) === 404) return undefined;
      throw error;
    })) as RepositorySync | undefined;
  }

  /** Undefined when another node created it first (409). */
  async create(name: string, spec: RepositorySync['spec']): Promise<RepositorySync | undefined> {
    const body = { apiVersion: `${GROUP}/${VERSION}`, kind: REPOSITORY_SYNC.kind, metadata: { name, namespace: this.namespace }, spec };
    return (await this.custom.createNamespacedCustomObject({ ...this.common, body }).catch((error: unknown) => {
      if (httpStatus(error) === 409) return undefined;
      throw error;
    })) as RepositorySync | undefined;
  }

  /** A replace conditioned on the resourceVersion read; undefined when it lost (409). */
  async replace(sync: RepositorySync): Promise<RepositorySync | undefined> {
    return (await this.custom
      .replaceNamespacedCustomObject({ ...this.common, name: sync.metadata.name, body: sync })
      .catch((error: unknown) => {
        if (httpStatus(error) === 409) return undefined;
        throw error;
      })) as RepositorySync | undefined;
  }

  async delete(name: string): Promise<void> {
    await this.custom.deleteNamespacedCustomObject({ ...this.common, name, propagationPolicy: 'Background' }).catch((error: unknown) => {
      if (httpStatus(error) !== 404) throw error;
    });
  }

  /** The attempt's credential Secret (its keys and values), owned by its RepositorySync (so it goes with it). */
  async writeCredential(sync: RepositorySync, secretName: string, values: Record<string, string>): Promise<void> {
    const secret: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: secretName,
        namespace: this.namespace,
        labels: { 'acis.dev/repository-sync': sync.metadata.name },
        ownerReferences: [
          {
            apiVersion: `${GROUP}/${VERSION}`,
            kind: REPOSITORY_SYNC.kind,
            name: sync.metadata.name,
            uid: sync.metadata.uid!,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      type: 'Opaque',
      data: Object.fromEntries(Object.entries(values).map(([key, value]) => [key, Buffer.from(value).toString('base64')])),
    };
    await this.core.createNamespacedSecret({ namespace: this.namespace, body: secret }).catch(async (error: unknown) => {
      if (httpStatus(error) !== 409) throw error;
      await this.core.replaceNamespacedSecret({ name: secretName, namespace: this.namespace, body: secret });
    });
  }
}

function specOf(repository: RepositoryRow, claim: string, generation: number, settings: RepositorySyncSettings): RepositorySync['spec'] {
  return {
    repositoryId: repository.id,
    url: repository.repo_url,
    branch: repository.branch,
    provider: repository.provider,
    ...(repository.ssh_known_hosts && { sshKnownHosts: repository.ssh_known_hosts }),
    credentialSecretName: syncCredentialSecretName(repositorySyncName(repository.id), generation),
    claim,
    requestGeneration: generation,
    settings,
  };
}

function logHanded(logger: Logger, repositoryId: string, name: string, generation: number): void {
  logger.info({ repository_id: repositoryId, repository_sync: name, generation }, 'sync handed to the cluster');
}
