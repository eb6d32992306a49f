/**
 * Under Kubernetes a claimed sync runs as a Job: the API server writes a RepositorySync (created, or
 * its `requestGeneration` bumped, with the attempt's claim) and, when the repository has a
 * credential, a Secret holding its decrypted value for that attempt alone, owned by the
 * RepositorySync; the controller starts the Job, mounts the Secret into its pod only, and deletes
 * the Secret when the Job ends (controller/reposync-*.ts). The API server never creates pods.
 */
import { readFileSync } from 'node:fs';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { GROUP, REPOSITORY_SYNC, type RepositorySync, VERSION } from '../../controller/api/v1alpha1.js';
import { httpStatus } from '../../controller/kube-errors.js';
import type { RepositoryRow } from './repositories.repository.js';
import type { CredentialSecretSource, SyncDispatch } from './sync.js';
import type { Db } from '../core/db/database.js';
import { findCredentialCiphertext } from '../credentials/credentials.repository.js';

const IN_CLUSTER_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The namespace: ACIS_K8S_NAMESPACE, else the pod's own, else `default`. */
export function kubernetesNamespace(configured: string | undefined): string {
  if (configured) return configured;
  try {
    return readFileSync(IN_CLUSTER_NAMESPACE, 'utf8').trim() || 'default';
  } catch {
    return 'default';
  }
}

/** A repository's RepositorySync name: its id as a DNS label (`rep_01ABC` → `rep-01abc`). */
export function repositorySyncName(repositoryId: string): string {
  return repositoryId.toLowerCase().replace(/_/g, '-');
}

export function kubernetesSyncDispatch(deps: {
  db: Db;
  namespace: string;
  credentialSecret: CredentialSecretSource;
  logger: Logger;
  /** A kubeconfig file (KUBECONFIG); absent: the in-cluster service account. */
  kubeconfigPath: string | undefined;
}): SyncDispatch {
  const kubeConfig = loadKubeConfig(deps.kubeconfigPath);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const namespace = deps.namespace;
  const common = { group: GROUP, version: VERSION, namespace, plural: REPOSITORY_SYNC.plural };

  return async (repository: RepositoryRow, claim: string) => {
    const name = repositorySyncName(repository.id);
    const credentialSecretName = repository.credential_id ? `${name}-credential` : undefined;
    const existing = (await custom.getNamespacedCustomObject({ ...common, name }).catch((error: unknown) => {
      if (httpStatus(error) === 404) return undefined;
      throw error;
    })) as RepositorySync | undefined;
    const spec = {
      repositoryId: repository.id,
      url: repository.repo_url,
      branch: repository.branch,
      ...(credentialSecretName && { credentialSecretName }),
      claim,
      requestGeneration: (existing?.spec.requestGeneration ?? 0) + 1,
    };
    const written = (
      existing
        ? await custom.replaceNamespacedCustomObject({
            ...common,
            name,
            body: { ...existing, spec },
          })
        : await custom.createNamespacedCustomObject({
            ...common,
            body: { apiVersion: `${GROUP}/${VERSION}`, kind: REPOSITORY_SYNC.kind, metadata: { name, namespace }, spec },
          })
    ) as RepositorySync;
    if (credentialSecretName && repository.credential_id) {
      const row = await findCredentialCiphertext(deps.db, repository.credential_id);
      if (!row) throw new Error('the repository credential no longer exists');
      const secret: V1Secret = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: credentialSecretName,
          namespace,
          labels: { 'acis.dev/repository-sync': name },
          ownerReferences: [{ apiVersion: `${GROUP}/${VERSION}`, kind: REPOSITORY_SYNC.kind, name, uid: written.metadata.uid!, controller: true, blockOwnerDeletion: true }],
        },
        type: 'Opaque',
        data: { secret: Buffer.from(await deps.credentialSecret({ id: repository.credential_id, secret_ciphertext: row.secret_ciphertext })).toString('base64') },
      };
      await core.createNamespacedSecret({ namespace, body: secret }).catch(async (error: unknown) => {
        if (httpStatus(error) !== 409) throw error;
        await core.replaceNamespacedSecret({ name: credentialSecretName, namespace, body: secret });
      });
    }
    deps.logger.info({ repository_id: repository.id, repository_sync: name, generation: spec.requestGeneration }, 'sync handed to the cluster');
  };
}

/** The cluster's kubeconfig: a file (KUBECONFIG), else the in-cluster service account. */
export function loadKubeConfig(file: string | undefined): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (file) kubeConfig.loadFromFile(file);
  else kubeConfig.loadFromCluster();
  return kubeConfig;
}
