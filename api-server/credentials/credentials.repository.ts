import type { Insertable, Selectable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { CredentialsTable } from '../core/db/schema.js';

/**
 * Everything but the ciphertext: reads for the API never load the secret at all, so no code path
 * serving a response can leak it by accident.
 */
export type CredentialRow = Omit<Selectable<CredentialsTable>, 'secret_ciphertext'>;
export type CredentialInsert = Insertable<CredentialsTable>;

const PUBLIC_COLUMNS = ['id', 'integration_id', 'name', 'type', 'metadata', 'created_at', 'updated_at'] as const;

export function selectCredentials(db: Db, integrationId: string) {
  return db.selectFrom('credentials').select(PUBLIC_COLUMNS).where('integration_id', '=', integrationId);
}

export function findCredential(db: Db, integrationId: string, credentialId: string): Promise<CredentialRow | undefined> {
  return selectCredentials(db, integrationId).where('id', '=', credentialId).executeTakeFirst();
}

export function findCredentialByName(db: Db, integrationId: string, name: string): Promise<CredentialRow | undefined> {
  return selectCredentials(db, integrationId).where('name', '=', name).executeTakeFirst();
}

/** Inserts unless the (integration, name) is taken; undefined means another credential holds the name. */
export function insertCredentialIfAbsent(db: Db, row: CredentialInsert): Promise<CredentialRow | undefined> {
  return db
    .insertInto('credentials')
    .values(row)
    .onConflict((oc) => oc.columns(['integration_id', 'name']).doNothing())
    .returning(PUBLIC_COLUMNS)
    .executeTakeFirst();
}

export async function deleteCredential(db: Db, credentialId: string): Promise<void> {
  await db.deleteFrom('credentials').where('id', '=', credentialId).execute();
}

/**
 * The one read of a credential's ciphertext, for the repository sync worker that hands it to git.
 * No route reaches this.
 */
export function findCredentialCiphertext(db: Db, credentialId: string): Promise<{ type: string; secret_ciphertext: string } | undefined> {
  return db.selectFrom('credentials').select(['type', 'secret_ciphertext']).where('id', '=', credentialId).executeTakeFirst();
}

/** The encrypted secrets of one type in the given integrations' registries (webhook secrets). */
export function findCredentialCiphertextsOfType(
  db: Db,
  integrationIds: string[],
  type: string,
): Promise<Array<{ id: string; integration_id: string; secret_ciphertext: string }>> {
  if (integrationIds.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('credentials')
    .select(['id', 'integration_id', 'secret_ciphertext'])
    .where('integration_id', 'in', integrationIds)
    .where('type', '=', type)
    .execute();
}
