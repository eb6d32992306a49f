import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { RepositoriesTable } from '../core/db/schema.js';

export type RepositoryRow = Selectable<RepositoriesTable>;
export type RepositoryInsert = Insertable<RepositoriesTable>;
export type RepositoryUpdate = Updateable<RepositoriesTable>;
/** A repository with its computed skill count, as the API shows it. */
export type RepositoryView = RepositoryRow & { skill_count: number };

// Counted on read rather than stored: the skills table is the only truth, and a per-repository
// count is one index range scan (skills_list).
const skillCount = sql<number>`(select count(*)::int from skills where skills.repository_id = repositories.id)`.as('skill_count');

/** A repository of the integration's registry, or undefined (missing and foreign look the same). */
export function findRepository(db: Db, integrationId: string, repositoryId: string): Promise<RepositoryRow | undefined> {
  return db
    .selectFrom('repositories')
    .selectAll()
    .where('integration_id', '=', integrationId)
    .where('id', '=', repositoryId)
    .executeTakeFirst();
}

export function selectRepositoryViews(db: Db, integrationId: string) {
  return db.selectFrom('repositories').selectAll('repositories').select(skillCount).where('integration_id', '=', integrationId);
}

export function findRepositoryView(db: Db, integrationId: string, repositoryId: string): Promise<RepositoryView | undefined> {
  return selectRepositoryViews(db, integrationId).where('id', '=', repositoryId).executeTakeFirst();
}

/** Repositories of every integration whose URL is one of `urls` (compared lower-cased, without a trailing slash). */
export function findRepositoriesByUrls(db: Db, urls: string[]): Promise<RepositoryRow[]> {
  if (urls.length === 0) return Promise.resolve([]);
  return db.selectFrom('repositories').selectAll().where(sql<string>`rtrim(lower(repo_url), '/')`, 'in', urls).execute();
}

export function findRepositoryByName(db: Db, integrationId: string, name: string): Promise<RepositoryRow | undefined> {
  return db.selectFrom('repositories').selectAll().where('integration_id', '=', integrationId).where('name', '=', name).executeTakeFirst();
}

/** Inserts unless the (integration, name) is taken; undefined means another repository holds the name. */
export function insertRepositoryIfAbsent(db: Db, row: RepositoryInsert): Promise<RepositoryRow | undefined> {
  return db
    .insertInto('repositories')
    .values(row)
    .onConflict((oc) => oc.columns(['integration_id', 'name']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

/** undefined: the repository was deleted meanwhile. */
export function updateRepository(db: Db, repositoryId: string, changes: RepositoryUpdate): Promise<RepositoryView | undefined> {
  return db.updateTable('repositories').set(changes).where('id', '=', repositoryId).returningAll().returning(skillCount).executeTakeFirst();
}

export async function deleteRepository(db: Db, repositoryId: string): Promise<void> {
  await db.deleteFrom('repositories').where('id', '=', repositoryId).execute();
}

/** A repository that uses the credential, if any (the oldest, so the answer is stable). */
export async function repositoryUsingCredential(db: Db, credentialId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('repositories')
    .select('id')
    .where('credential_id', '=', credentialId)
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  return row?.id;
}

/** A tenant that has the repository attached, else a role that pins it: what blocks its deletion. */
export async function repositoryDependent(db: Db, repositoryId: string): Promise<string | undefined> {
  const tenant = await db
    .selectFrom('tenants')
    .select('id')
    .where('repository_id', '=', repositoryId)
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  if (tenant) return tenant.id;
  const role = await db
    .selectFrom('roles')
    .select('id')
    .where('repository_id', '=', repositoryId)
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  return role?.id;
}

/**
 * Claims the repository's sync for this attempt: one conditional update, so of two concurrent
 * requests (on any nodes) exactly one moves it to `syncing`. undefined: missing, or a sync is in flight.
 */
export function claimSync(
  db: Db,
  repositoryId: string,
  attempt: { claim: string; nodeId: string; now: Date },
): Promise<RepositoryView | undefined> {
  return db
    .updateTable('repositories')
    .set({
      sync_state: 'syncing',
      sync_error: null,
      sync_claim: attempt.claim,
      sync_node_id: attempt.nodeId,
      sync_started_at: attempt.now,
      // This sync reads the branch head as it is now, which covers any push that asked for it.
      sync_requested: false,
    })
    .where('id', '=', repositoryId)
    .where('sync_state', '<>', 'syncing')
    .returningAll()
    .returning(skillCount)
    .executeTakeFirst();
}

/** Asks for one more sync once the one in flight ends (a push arrived meanwhile); false when none is in flight. */
export async function requestSyncAfterCurrent(db: Db, repositoryId: string): Promise<boolean> {
  const marked = await db
    .updateTable('repositories')
    .set({ sync_requested: true })
    .where('id', '=', repositoryId)
    .where('sync_state', '=', 'syncing')
    .executeTakeFirst();
  return marked.numUpdatedRows > 0n;
}

/** Repositories a push asked to sync again whose sync in flight has ended (any node's, or a Job's). */
export async function requestedSyncs(db: Db): Promise<string[]> {
  const rows = await db
    .selectFrom('repositories')
    .select('id')
    .where('sync_requested', '=', true)
    .where('sync_state', '<>', 'syncing')
    .execute();
  return rows.map((row) => row.id);
}

/** Takes (clears) a request for another sync; whether there was one. */
export async function takeSyncRequest(db: Db, repositoryId: string): Promise<boolean> {
  const taken = await db
    .updateTable('repositories')
    .set({ sync_requested: false })
    .where('id', '=', repositoryId)
    .where('sync_requested', '=', true)
    .where('sync_state', '<>', 'syncing')
    .executeTakeFirst();
  return taken.numUpdatedRows > 0n;
}

/**
 * Syncs left `syncing` by a process that is gone: this node's previous life (`includeOwn`, at start),
 * nodes whose heartbeat is older than `staleBefore`, or no node at all.
 */
export function orphanedSyncs(db: Db, options: { nodeId: string; includeOwn: boolean; staleBefore: Date }) {
  return db
    .selectFrom('repositories')
    .leftJoin('nodes', 'nodes.id', 'repositories.sync_node_id')
    .select(['repositories.id', 'repositories.sync_claim'])
    .where('repositories.sync_state', '=', 'syncing')
    .where((eb) =>
      eb.or([
        ...(options.includeOwn ? [eb('repositories.sync_node_id', '=', options.nodeId)] : []),
        eb('repositories.sync_node_id', 'is', null),
        eb.and([eb('repositories.sync_node_id', '!=', options.nodeId), eb('nodes.heartbeat_at', '<', options.staleBefore)]),
        eb.and([eb('repositories.sync_node_id', '!=', options.nodeId), eb('nodes.id', 'is', null)]),
      ]),
    )
    .execute();
}

/** Every sync in flight with its claim and start, whichever node claimed it (syncs handed to the cluster). */
export function syncsInFlight(db: Db) {
  return db.selectFrom('repositories').select(['id', 'sync_claim', 'sync_started_at']).where('sync_state', '=', 'syncing').execute();
}

/** Whether the attempt with this claim is still the repository's current one. */
export async function isCurrentSync(db: Db, repositoryId: string, claim: string): Promise<boolean> {
  const row = await db
    .selectFrom('repositories')
    .select('id')
    .where('id', '=', repositoryId)
    .where('sync_state', '=', 'syncing')
    .where('sync_claim', '=', claim)
    .executeTakeFirst();
  return row !== undefined;
}

/** Moves an orphaned sync to this node under a new claim, unless someone else took it first. */
export async function takeOverSync(
  db: Db,
  repositoryId: string,
  previousClaim: string | null,
  attempt: { claim: string; nodeId: string; now: Date },
): Promise<boolean> {
  const taken = await db
    .updateTable('repositories')
    .set({ sync_claim: attempt.claim, sync_node_id: attempt.nodeId, sync_started_at: attempt.now })
    .where('id', '=', repositoryId)
    .where('sync_state', '=', 'syncing')
    .where((eb) => (previousClaim === null ? eb('sync_claim', 'is', null) : eb('sync_claim', '=', previousClaim)))
    .executeTakeFirst();
  return taken.numUpdatedRows > 0n;
}

/**
 * Ends a sync attempt (ready or error) if it is still the one in flight: a PATCH of branch or
 * credential (back to `pending`) or a takeover made it stale, and then its outcome is dropped.
 */
export async function endSync(db: Db, repositoryId: string, claim: string, changes: RepositoryUpdate): Promise<boolean> {
  const ended = await db
    .updateTable('repositories')
    .set({ ...changes, sync_claim: null, sync_node_id: null, sync_started_at: null })
    .where('id', '=', repositoryId)
    .where('sync_state', '=', 'syncing')
    .where('sync_claim', '=', claim)
    .executeTakeFirst();
  return ended.numUpdatedRows > 0n;
}

/** Locks the repository row while its attempt is still current (the catalog write happens under it). */
export function lockCurrentSync(db: Db, repositoryId: string, claim: string) {
  return db
    .selectFrom('repositories')
    .select('id')
    .where('id', '=', repositoryId)
    .where('sync_state', '=', 'syncing')
    .where('sync_claim', '=', claim)
    .forUpdate()
    .executeTakeFirst();
}

/** A repository by id alone (the sync worker acts for whichever integration registered it). */
export function findRepositoryById(db: Db, repositoryId: string): Promise<RepositoryRow | undefined> {
  return db.selectFrom('repositories').selectAll().where('id', '=', repositoryId).executeTakeFirst();
}
