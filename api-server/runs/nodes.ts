import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expireApprovalsOfMessage } from '../approvals/approvals.repository.js';
import { type Db, json } from '../core/db/database.js';
import { ProblemError, problemBody } from '../core/problems.js';
import { presentMessage } from '../messages/messages.presenter.js';
import { platformLine } from './run-stream.js';

/**
 * A node whose heartbeat is older than this is gone for the repository syncs it ran (they are taken
 * over). Its runs go much sooner: after ACIS_NODE_STALE_SECONDS (`failOrphanedRuns`).
 */
export const NODE_STALE_MS = 60_000;

/**
 * This API server's node id: stable across restarts of the same data dir (so a restarted process
 * recognises the runs it left behind), or `ACIS_NODE_ID` (in Kubernetes, the pod name).
 */
export async function resolveNodeId(dataDir: string, configured = process.env.ACIS_NODE_ID): Promise<string> {
  if (configured) return configured;
  const file = path.join(dataDir, 'node-id');
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const id = `node_${randomBytes(8).toString('hex')}`;
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, `${id}\n`);
  return id;
}

export async function heartbeat(db: Db, nodeId: string, now: Date): Promise<void> {
  await db
    .insertInto('nodes')
    .values({ id: nodeId, started_at: now, heartbeat_at: now })
    .onConflict((oc) => oc.column('id').doUpdateSet({ heartbeat_at: now }))
    .execute();
}

/**
 * Fails runs left `in_progress` by a process that died: those of this node's previous life (at
 * start), and those of nodes that stopped beating. Each gets a terminal `error` line, so a client
 * re-attaching to it sees the stream end, and its pending approvals expire.
 */
export async function failOrphanedRuns(
  db: Db,
  options: { nodeId: string; includeOwn: boolean; now: Date; baseUrl: string; staleMs: number },
): Promise<number> {
  const staleBefore = new Date(options.now.getTime() - options.staleMs);
  const orphans = await db
    .selectFrom('messages')
    .leftJoin('nodes', 'nodes.id', 'messages.node_id')
    .select(['messages.id', 'messages.conversation_id', 'messages.request_id'])
    .where('messages.role', '=', 'assistant')
    .where('messages.status', '=', 'in_progress')
    .where((eb) =>
      eb.or([
        ...(options.includeOwn ? [eb('messages.node_id', '=', options.nodeId)] : []),
        eb('messages.node_id', 'is', null),
        eb.and([eb('messages.node_id', '!=', options.nodeId), eb('nodes.heartbeat_at', '<', staleBefore)]),
        eb.and([eb('messages.node_id', '!=', options.nodeId), eb('nodes.id', 'is', null)]),
      ]),
    )
    .execute();
  for (const orphan of orphans) {
    const problem = new ProblemError('internal-error', 500, { detail: 'The server hosting this run stopped before it ended.' });
    await db.transaction().execute(async (trx) => {
      const failed = await trx
        .updateTable('messages')
        .set({ status: 'failed', node_id: null, updated_at: options.now })
        .where('id', '=', orphan.id)
        .where('status', '=', 'in_progress')
        .returningAll()
        .executeTakeFirst();
      if (!failed) return;
      // A run that is gone cannot be resumed: an approval it was parked on can no longer be granted.
      await expireApprovalsOfMessage(trx, orphan.id, options.now);
      // As on every stream: message_end (the failed message as stored) right before the terminal line.
      const lines = [
        platformLine('message_end', { message: presentMessage(failed) }),
        platformLine('error', {
          problem: problemBody(problem, {
            baseUrl: options.baseUrl,
            instance: `/conversations/${orphan.conversation_id}/messages/${orphan.id}`,
            // The request that started the run, as its stream's other lines would have said.
            requestId: orphan.request_id ?? orphan.id,
          }),
        }),
      ];
      const stored = await trx
        .selectFrom('run_lines')
        .select((eb) => eb.fn.max('seq').as('last'))
        .where('message_id', '=', orphan.id)
        .executeTakeFirst();
      const last = Number(stored?.last ?? 0);
      await trx
        .insertInto('run_lines')
        .values(lines.map((line, index) => ({ message_id: orphan.id, seq: last + index + 1, line: json(line), created_at: options.now })))
        .execute();
    });
  }
  return orphans.length;
}

/** Warm holds whose expiry passed while no process was there to recycle them show as cold. */
export async function coolLapsedHolds(db: Db, now: Date): Promise<void> {
  await db
    .updateTable('conversations')
    .set({ sandbox_state: 'cold', sandbox_expires_at: null })
    .where('sandbox_state', '=', 'warm')
    .where('sandbox_expires_at', '<=', now)
    .execute();
}
