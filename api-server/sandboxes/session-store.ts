import { type Db, json } from '../core/db/database.js';
import { type SessionKeyLike, sessionStoreKey } from '../../runner/protocol.js';
import { forgetSkillListings } from '../skills/skill-listings.js';

/**
 * The agent runtime's transcripts, mirrored into the conversation's storage (here: Postgres) through
 * the runner, so a runner on any node can resume the session. Entries are opaque JSON; those with a
 * `uuid` are written once even when the runtime retries an append.
 */
export interface ConversationSessionStore {
  load(key: SessionKeyLike): Promise<unknown[] | null>;
  append(key: SessionKeyLike, entries: unknown[]): Promise<void>;
}

export function databaseSessionStore(db: Db, conversationId: string): ConversationSessionStore {
  return {
    async load(key) {
      const rows = await db
        .selectFrom('agent_session_entries')
        .select('entry')
        .where('conversation_id', '=', conversationId)
        .where('session_key', '=', sessionStoreKey(key))
        .orderBy('seq')
        .execute();
      // A resumed session announces the skills of the run resuming it, not those of earlier runs.
      return rows.length === 0 ? null : forgetSkillListings(rows.map((row) => row.entry));
    },
    async append(key, entries) {
      if (entries.length === 0) return;
      await db
        .insertInto('agent_session_entries')
        .values(
          entries.map((entry) => ({
            conversation_id: conversationId,
            session_key: sessionStoreKey(key),
            entry_uuid: entryUuid(entry),
            entry: json(entry),
          })),
        )
        .onConflict((oc) => oc.columns(['conversation_id', 'session_key', 'entry_uuid']).where('entry_uuid', 'is not', null).doNothing())
        .execute();
    },
  };
}

function entryUuid(entry: unknown): string | null {
  const uuid = (entry as { uuid?: unknown } | null)?.uuid;
  return typeof uuid === 'string' ? uuid : null;
}
