/**
 * What a node needs to carry on a run whose node died mid-turn (RunManager.takeOver), read once it
 * has claimed the run (claimOrphanedRun): the conversation, the run's secrets, the lines stored so
 * far, and where on the runner's link the dead node's record ends (the highest `link_seq` stored).
 * The stored lines are the stream's: a client counting them re-attaches anywhere with the same numbers.
 */
import { findConversation } from '../conversations/conversations.repository.js';
import type { Vault } from '../core/crypto.js';
import type { Db } from '../core/db/database.js';
import { resolveRunSecrets } from '../secrets/secrets.service.js';
import { effectiveSkillIds } from '../skills/materialise.js';
import type { OrphanedRun } from './nodes.js';
import type { TakenOverRun } from './run-request.js';
import type { StreamLine } from './run-stream.js';

/** The claimed run's state; undefined when its conversation is gone meanwhile. */
export async function loadTakenOverRun(
  deps: { db: Db; vault: Vault },
  orphan: OrphanedRun,
  baseUrl: string,
): Promise<TakenOverRun | undefined> {
  const [conversation, sent] = await Promise.all([findConversation(deps.db, orphan.conversation_id), sentMessage(deps.db, orphan)]);
  if (!conversation || !sent) return undefined;
  const [rows, secrets] = await Promise.all([
    deps.db.selectFrom('run_lines').select(['seq', 'line', 'link_seq']).where('message_id', '=', orphan.id).orderBy('seq').execute(),
    resolveRunSecrets(deps, { runId: orphan.id, conversation }),
  ]);
  // Lines are stored in order, each write once the previous one committed: 1..n, with no gap.
  return {
    request: {
      conversation,
      assistantMessageId: orphan.id,
      content: sent.content,
      env: (sent.env as Record<string, string> | null) ?? undefined,
      onCapacity: 'hold',
      leadingLines: [],
      filler: false,
      baseUrl,
      requestId: orphan.request_id ?? orphan.id,
      secrets,
      skillIds: effectiveSkillIds(conversation, sent.skill_ids as string[] | null),
    },
    stored: rows.map((row) => row.line as StreamLine),
    after: rows.reduce((highest, row) => Math.max(highest, row.link_seq ?? 0), 0),
  };
}

/**
 * What the run's send asked: the user message stored with it (the one just before it; ids are
 * time-ordered) for the text, the run's own message for `env` and `skill_ids`.
 */
async function sentMessage(db: Db, orphan: OrphanedRun): Promise<{ content: string; env: unknown; skill_ids: unknown } | undefined> {
  const [user, run] = await Promise.all([
    db
      .selectFrom('messages')
      .select('content')
      .where('conversation_id', '=', orphan.conversation_id)
      .where('role', '=', 'user')
      .where('id', '<', orphan.id)
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst(),
    db.selectFrom('messages').select(['env', 'skill_ids']).where('id', '=', orphan.id).executeTakeFirst(),
  ]);
  return user && run ? { content: user.content, env: run.env, skill_ids: run.skill_ids } : undefined;
}
