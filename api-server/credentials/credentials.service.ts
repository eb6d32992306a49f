import type { z } from 'zod';
import { isForeignKeyViolation, json } from '../core/db/database.js';
import type { CoreDeps } from '../core/deps.js';
import { type PageRequest, paginate } from '../core/pagination.js';
import type { ServicePrincipal } from '../core/principal.js';
import { problems } from '../core/problems.js';
import { repositoryUsingCredential } from '../repositories/repositories.repository.js';
import {
  type CredentialRow,
  deleteCredential,
  findCredential,
  findCredentialByName,
  insertCredentialIfAbsent,
  selectCredentials,
} from './credentials.repository.js';
import type { CreateCredentialBody, Credential } from './credentials.schemas.js';

export function presentCredential(row: CredentialRow): z.output<typeof Credential> {
  return {
    object: 'credential',
    id: row.id,
    name: row.name,
    type: row.type,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** The AAD of a credential's ciphertext: it only decrypts as the secret of this very credential. */
export function credentialSecretContext(credentialId: string): string {
  return `credential:${credentialId}`;
}

export async function getCredentialInScope(deps: CoreDeps, principal: ServicePrincipal, credentialId: string): Promise<CredentialRow> {
  const credential = await findCredential(deps.db, principal.integrationId, credentialId);
  if (!credential) throw problems.notFound('credential');
  return credential;
}

export async function createCredential(
  deps: CoreDeps,
  principal: ServicePrincipal,
  body: z.output<typeof CreateCredentialBody>,
): Promise<CredentialRow> {
  const id = deps.newId('credential');
  const now = deps.now();
  const row = {
    id,
    integration_id: principal.integrationId,
    name: body.name,
    type: body.type,
    secret_ciphertext: deps.vault.encrypt(body.secret, credentialSecretContext(id)),
    metadata: json(body.metadata ?? {}),
    created_at: now,
    updated_at: now,
  };
  // The unique constraint decides between concurrent creators; the loser names the winner. The loop
  // only repeats if the holder was deleted between our insert and our read.
  for (;;) {
    const created = await insertCredentialIfAbsent(deps.db, row);
    if (created) return created;
    const holder = await findCredentialByName(deps.db, principal.integrationId, body.name);
    if (holder) throw problems.nameConflict(holder.id, 'A credential with this name exists.');
  }
}

export function listCredentials(deps: CoreDeps, principal: ServicePrincipal, query: PageRequest) {
  return paginate(selectCredentials(deps.db, principal.integrationId), 'id', query);
}

/** Refused while a repository uses the credential: its syncs would fail silently otherwise. */
export async function removeCredential(deps: CoreDeps, principal: ServicePrincipal, credentialId: string): Promise<void> {
  const credential = await getCredentialInScope(deps, principal, credentialId);
  const dependent = await repositoryUsingCredential(deps.db, credential.id);
  if (dependent) throw credentialInUse(dependent);
  try {
    await deleteCredential(deps.db, credential.id);
  } catch (error) {
    if (!isForeignKeyViolation(error)) throw error;
    // A repository took a reference between the check and the delete.
    const latecomer = await repositoryUsingCredential(deps.db, credential.id);
    if (!latecomer) throw error;
    throw credentialInUse(latecomer);
  }
}

function credentialInUse(repositoryId: string) {
  return problems.inUse(repositoryId, 'A repository uses this credential; change or delete the repository first.');
}
