import type { z } from 'zod';
import { isForeignKeyViolation, isUniqueViolation, json } from '../core/db/database.js';
import type { AppDeps } from '../deps.js';
import { changedFields, isEmpty } from '../core/merge.js';
import { type PageRequest, paginate } from '../core/pagination.js';
import type { ServicePrincipal } from '../core/principal.js';
import { type FieldError, ProblemError, problems } from '../core/problems.js';
import { findCredential } from '../credentials/credentials.repository.js';
import { remotePolicy, remoteRefusal } from './remote-policy.js';
import {
  deleteRepository,
  findRepositoryByName,
  findRepositoryView,
  insertRepositoryIfAbsent,
  type RepositoryRow,
  type RepositoryView,
  repositoryDependent,
  selectRepositoryViews,
  updateRepository,
} from './repositories.repository.js';
import type { CreateRepositoryBody, PatchRepositoryBody, Repository, RepositorySyncDetails } from './repositories.schemas.js';

export function presentRepository(row: RepositoryView): z.output<typeof Repository> {
  return {
    object: 'repository',
    id: row.id,
    name: row.name,
    repo_url: row.repo_url,
    branch: row.branch,
    provider: row.provider as z.output<typeof Repository>['provider'],
    credential_id: row.credential_id,
    sync: {
      state: row.sync_state,
      last_synced_at: row.sync_last_synced_at?.toISOString() ?? null,
      error: row.sync_error,
    },
    skill_count: row.skill_count,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export async function getRepositoryInScope(deps: AppDeps, principal: ServicePrincipal, repositoryId: string): Promise<RepositoryView> {
  const repository = await findRepositoryView(deps.db, principal.integrationId, repositoryId);
  if (!repository) throw problems.notFound('repository');
  return repository;
}

const NO_SUCH_CREDENTIAL: FieldError = { pointer: '/credential_id', message: 'no such credential' };

/** The rules the body schema cannot know: deployment configuration and references. */
async function referenceErrors(
  deps: AppDeps,
  principal: ServicePrincipal,
  fields: { repoUrl?: string; credentialId?: string | null },
): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  if (fields.repoUrl !== undefined) {
    const refusal = await remoteRefusal(fields.repoUrl, remotePolicy(deps.config));
    if (refusal) errors.push({ pointer: '/repo_url', message: refusal });
  }
  if (fields.credentialId && !(await findCredential(deps.db, principal.integrationId, fields.credentialId))) {
    errors.push(NO_SUCH_CREDENTIAL);
  }
  return errors;
}

export async function createRepository(
  deps: AppDeps,
  principal: ServicePrincipal,
  body: z.output<typeof CreateRepositoryBody>,
): Promise<RepositoryView> {
  const errors = await referenceErrors(deps, principal, { repoUrl: body.repo_url, credentialId: body.credential_id });
  if (errors.length > 0) throw problems.invalid(errors);
  const now = deps.now();
  const row = {
    id: deps.newId('repository'),
    integration_id: principal.integrationId,
    name: body.name,
    repo_url: body.repo_url,
    branch: body.branch,
    provider: body.provider,
    credential_id: body.credential_id ?? null,
    sync_state: 'pending' as const,
    sync_last_synced_at: null,
    sync_error: null,
    metadata: json(body.metadata ?? {}),
    created_at: now,
    updated_at: now,
  };
  // The loop only repeats if the name's holder was deleted between our insert and our read.
  for (;;) {
    let created: Awaited<ReturnType<typeof insertRepositoryIfAbsent>>;
    try {
      created = await insertRepositoryIfAbsent(deps.db, row);
    } catch (error) {
      // The credential was deleted between the check and the insert.
      if (isForeignKeyViolation(error)) throw problems.invalid([NO_SUCH_CREDENTIAL]);
      throw error;
    }
    if (created) {
      // The scan starts at registration; the answer shows the repository as inserted (`pending`).
      deps.repositorySync.start(created.id).catch((error: unknown) => {
        deps.logger.error({ err: error, repository_id: created.id }, 'starting a repository sync failed');
      });
      return { ...created, skill_count: 0 };
    }
    const holder = await findRepositoryByName(deps.db, principal.integrationId, body.name);
    if (holder) throw nameConflict(holder.id);
  }
}

export function listRepositories(deps: AppDeps, principal: ServicePrincipal, query: PageRequest) {
  return paginate(selectRepositoryViews(deps.db, principal.integrationId), 'id', query);
}

/**
 * Merge semantics; a no-op writes nothing. A new branch or credential makes the catalog stale, so
 * sync goes back to `pending` (and a previous error is dropped) until the next sync.
 */
export async function patchRepository(
  deps: AppDeps,
  principal: ServicePrincipal,
  repositoryId: string,
  body: z.output<typeof PatchRepositoryBody>,
): Promise<RepositoryView> {
  const repository = await getRepositoryInScope(deps, principal, repositoryId);
  const changes = changedFields(repository, body);
  if (isEmpty(changes)) return repository;
  const errors = await referenceErrors(deps, principal, { credentialId: changes.credential_id });
  if (errors.length > 0) throw problems.invalid(errors);
  const resync = changes.branch !== undefined || changes.credential_id !== undefined;
  let updated: RepositoryView | undefined;
  try {
    updated = await updateRepository(deps.db, repository.id, {
      ...(changes.name !== undefined && { name: changes.name }),
      ...(changes.branch !== undefined && { branch: changes.branch }),
      ...(changes.credential_id !== undefined && { credential_id: changes.credential_id }),
      ...(changes.metadata !== undefined && { metadata: json(changes.metadata) }),
      ...(resync && { sync_state: 'pending' as const, sync_error: null }),
      updated_at: deps.now(),
    });
  } catch (error) {
    if (isUniqueViolation(error) && changes.name !== undefined) {
      const holder = await findRepositoryByName(deps.db, principal.integrationId, changes.name);
      if (holder) throw nameConflict(holder.id);
    }
    if (isForeignKeyViolation(error)) throw problems.invalid([NO_SUCH_CREDENTIAL]);
    throw error;
  }
  if (!updated) throw problems.notFound('repository');
  return updated;
}

/**
 * Refused while a tenant has the repository attached or a role pins it (the conversations of those
 * would lose their skills); its skills go with it.
 */
export async function removeRepository(deps: AppDeps, principal: ServicePrincipal, repositoryId: string): Promise<void> {
  const repository = await getRepositoryInScope(deps, principal, repositoryId);
  const dependent = await repositoryDependent(deps.db, repository.id);
  if (dependent) throw repositoryInUse(dependent);
  try {
    await deleteRepository(deps.db, repository.id);
  } catch (error) {
    if (!isForeignKeyViolation(error)) throw error;
    // A tenant or role took a reference between the check and the delete.
    const latecomer = await repositoryDependent(deps.db, repository.id);
    if (!latecomer) throw error;
    throw repositoryInUse(latecomer);
  }
  await deps.repositorySync.forget(repository.id);
}

/**
 * POST /repositories/{id}/sync: claims a fresh sync (202 with `syncing`); a sync in flight on any
 * node is 409 `sync-in-progress`.
 */
export async function syncRepository(deps: AppDeps, principal: ServicePrincipal, repositoryId: string): Promise<RepositoryView> {
  const repository = await getRepositoryInScope(deps, principal, repositoryId);
  const claimed = await deps.repositorySync.start(repository.id);
  if (claimed) return claimed;
  // Deleted in between, or (the usual case) a sync already in flight.
  await getRepositoryInScope(deps, principal, repositoryId);
  throw new ProblemError('sync-in-progress', 409, {
    detail: 'A sync of this repository is already in flight; wait for it to end (state ready or error).',
  });
}

export function presentSyncDetails(row: RepositoryRow): z.output<typeof RepositorySyncDetails> {
  return {
    object: 'repository.sync',
    repository_id: row.id,
    state: row.sync_state,
    last_synced_at: row.sync_last_synced_at?.toISOString() ?? null,
    error: row.sync_error,
    commit: row.sync_commit,
    started_at: row.sync_state === 'syncing' ? (row.sync_started_at?.toISOString() ?? null) : null,
    warnings: row.sync_warnings,
  };
}

function nameConflict(holderId: string) {
  return problems.nameConflict(holderId, 'A repository with this name exists.');
}

function repositoryInUse(dependentId: string) {
  return problems.inUse(dependentId, 'The repository is attached to a tenant or pinned by a role; detach or unpin it first.');
}
