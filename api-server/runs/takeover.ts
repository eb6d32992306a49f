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
import type { OrphanedRun } from './nodes.js';
import type { RunRequest } from './run-request.js';
import type { StreamLine } from './run-stream.js';

export interface TakenOverRun {
  /** The run as a send would have asked for it: its turn is already on the runner, so no content or skills. */
  request: RunRequest;
  /** The lines stored by the node that died, numbered from 1. */
  stored: StreamLine[];
  /** The highest runner line those lines came from: the runner replays what came after; 0 when none did. */
  after: number;
}

/** The claimed run's state; undefined when its conversation is gone meanwhile. */
export async function loadTakenOverRun(
  deps: { db: Db; vault: Vault },
  orphan: OrphanedRun,
  baseUrl: string,
): Promise<TakenOverRun | undefined> {
  const conversation = await findConversation(deps.db, orphan.conversation_id);
  if (!conversation) return undefined;
  const [rows, secrets] = await Promise.all([
    deps.db.selectFrom('run_lines').select(['seq', 'line', 'link_seq']).where('message_id', '=', orphan.id).orderBy('seq').execute(),
    resolveRunSecrets(deps, { runId: orphan.id, conversation }),
  ]);
  // Lines are stored in order, each write once the previous one committed: 1..n, with no gap.
  return {
    request: {
      conversation,
      assistantMessageId: orphan.id,
      content: '',
      onCapacity: 'hold',
      leadingLines: [],
      filler: false,
      baseUrl,
      requestId: orphan.id,
      secrets,
      skillIds: [],
    },
    stored: rows.map((row) => row.line as StreamLine),
    after: rows.reduce((highest, row) => Math.max(highest, row.link_seq ?? 0), 0),
  };
}
