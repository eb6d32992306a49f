/**
 * Under Kubernetes a claimed sync runs as a Job: the API server writes the attempt's credential
 * Secret (`<name>-credential-<generation>`: what git authenticates with, for a GitHub App an
 * installation token minted here, never the App's key), then creates the RepositorySync or bumps its
 * `requestGeneration` with the attempt's claim. The controller starts the Job, mounts that Secret
 * into its pod only, and deletes it once the Job has ended (controller/reposync-*.ts). The API server
 * never creates pods.
 *
 * The bump is a replace conditioned on the resourceVersion read; when it loses (a status write, or
 * another node's bump) it reads again and retries, unless its claim is no longer current.
 */
import { CoreV1Api, CustomObjectsApi, type V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  GROUP,
  REPOSITORY_SYNC,
  type RepositorySync,
  SYNC_CREDENTIAL_KEY,
  syncCredentialSecretName,
  VERSION,
} from '../../controller/api/v1alpha1.js';
import { loadKubeConfig } from '../../kube/cluster-access.js';
import { httpStatus } from '../../kube/kube-errors.js';
import type { Db } from '../core/db/database.js';
import { deliveredCredential, type GitCredentialSource } from './git-credentials.js';
import { isCurrentSync, type RepositoryRow } from './repositories.repository.js';
import type { SyncDispatch } from './sync-dispatch.js';

/** Rounds of read-then-replace before a hand-over gives up. */
const BUMP_ATTEMPTS = 5;

/** A repository's RepositorySync name: its id as a DNS label (`rep_01ABC` → `rep-01abc`). */
export function repositorySyncName(repositoryId: string): string {
  return repositoryId.toLowerCase().replace(/_/g, '-');
}

export function kubernetesSyncDispatch(deps: {
  db: Db;
  namespace: string;
  gitCredential: GitCredentialSource;
  logger: Logger;
  /** A kubeconfig file (KUBECONFIG); absent: the in-cluster service account. */
  kubeconfigPath: string | undefined;
  /** The controller's Job deadline plus the longest git command: an attempt older than this is orphaned. */
  attemptDeadlineMs: number;
}): SyncDispatch {
  const kubeConfig = loadKubeConfig(deps.kubeconfigPath);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const namespace = deps.namespace;
  const common = { group: GROUP, version: VERSION, namespace, plural: REPOSITORY_SYNC.plural };

  const read = async (name: string): Promise<RepositorySync | undefined> =>
    (await custom.getNamespacedCustomObject({ ...common, name }).catch((error: unknown) => {
      if (httpStatus(error) === 404) return undefined;
      throw error;
    })) as RepositorySync | undefined;

  const writeCredential = async (sync: RepositorySync, secretName: string, credential: string) => {
    const secret: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: secretName,
        namespace,
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
      data: { [SYNC_CREDENTIAL_KEY]: Buffer.from(credential).toString('base64') },
    };
    await core.createNamespacedSecret({ namespace, body: secret }).catch(async (error: unknown) => {
      if (httpStatus(error) !== 409) throw error;
      await core.replaceNamespacedSecret({ name: secretName, namespace, body: secret });
    });
  };

  return {
    attemptDeadlineMs: deps.attemptDeadlineMs,

    async hand(repository: RepositoryRow, claim: string) {
      const name = repositorySyncName(repository.id);
      const resolved = await deps.gitCredential(repository);
      const credential = resolved && deliveredCredential(resolved);
      for (let round = 0; round < BUMP_ATTEMPTS; round++) {
        let existing = await read(name);
        if (!existing) {
          // The first generation: the Secret needs its owner's uid, so it follows the create (the Job's pod waits for it).
          const created = await custom
            .createNamespacedCustomObject({
              ...common,
              body: {
                apiVersion: `${GROUP}/${VERSION}`,
                kind: REPOSITORY_SYNC.kind,
                metadata: { name, namespace },
                spec: specOf(repository, claim, 1, credential !== undefined),
              },
            })
            .catch((error: unknown) => {
              if (httpStatus(error) === 409) return undefined;
              throw error;
            });
          if (!created) continue;
          if (credential) await writeCredential(created as RepositorySync, syncCredentialSecretName(name, 1), credential);
          return logHanded(deps.logger, repository.id, name, 1);
        }
        const generation = existing.spec.requestGeneration + 1;
        // Written before the bump, under this generation's own name: the controller deletes only ended generations' Secrets.
        if (credential) await writeCredential(existing, syncCredentialSecretName(name, generation), credential);
        existing = { ...existing, spec: specOf(repository, claim, generation, credential !== undefined) };
        const replaced = await custom.replaceNamespacedCustomObject({ ...common, name, body: existing }).catch((error: unknown) => {
          if (httpStatus(error) === 409) return undefined;
          throw error;
        });
        if (replaced) return logHanded(deps.logger, repository.id, name, generation);
        if (!(await isCurrentSync(deps.db, repository.id, claim))) {
          deps.logger.info({ repository_id: repository.id }, 'sync hand-over dropped: its claim was superseded meanwhile');
          return;
        }
      }
      throw new Error(`the RepositorySync ${name} kept changing; the sync was not handed over`);
    },

    async failureOf(repositoryId: string, claim: string) {
      const sync = await read(repositorySyncName(repositoryId));
      if (!sync || sync.spec.claim !== claim || sync.status?.observedRequestGeneration !== sync.spec.requestGeneration) return undefined;
      return sync.status.state === 'error' ? (sync.status.error ?? 'the sync job failed') : undefined;
    },

    async forget(repositoryId: string) {
      // Its Jobs, their pods and the credential Secrets are owned by it and go with it.
      await custom
        .deleteNamespacedCustomObject({ ...common, name: repositorySyncName(repositoryId), propagationPolicy: 'Background' })
        .catch((error: unknown) => {
          if (httpStatus(error) !== 404) throw error;
        });
    },
  };
}

function specOf(repository: RepositoryRow, claim: string, generation: number, withCredential: boolean): RepositorySync['spec'] {
  const name = repositorySyncName(repository.id);
  return {
    repositoryId: repository.id,
    url: repository.repo_url,
    branch: repository.branch,
    ...(withCredential && { credentialSecretName: syncCredentialSecretName(name, generation) }),
    claim,
    requestGeneration: generation,
  };
}

function logHanded(logger: Logger, repositoryId: string, name: string, generation: number): void {
  logger.info({ repository_id: repositoryId, repository_sync: name, generation }, 'sync handed to the cluster');
}
