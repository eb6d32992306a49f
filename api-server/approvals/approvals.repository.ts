import type { Insertable, Selectable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { ApprovalsTable } from '../core/db/schema.js';

export type ApprovalRow = Selectable<ApprovalsTable>;

/** Data access for approvals. Every state change is one conditional UPDATE, so two nodes never both resolve one. */

export function insertApproval(db: Db, row: Insertable<ApprovalsTable>): Promise<ApprovalRow> {
  return db.insertInto('approvals').values(row).returningAll().executeTakeFirstOrThrow();
}

export function findApproval(db: Db, approvalId: string): Promise<ApprovalRow | undefined> {
  return db.selectFrom('approvals').selectAll().where('id', '=', approvalId).executeTakeFirst();
}

export function selectConversationApprovals(db: Db, conversationId: string) {
  return db.selectFrom('approvals').selectAll().where('conversation_id', '=', conversationId);
}

export async function pendingApprovalIds(db: Db, conversationId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('approvals')
    .select('id')
    .where('conversation_id', '=', conversationId)
    .where('status', '=', 'pending')
    .execute();
  return rows.map((row) => row.id);
}

/** pending → approved | denied, only while still pending and before its expiry; undefined when it was not. */
export function resolvePendingApproval(
  db: Db,
  approvalId: string,
  resolution: { status: 'approved' | 'denied'; resolvedBy: string; note: string | null; now: Date },
): Promise<ApprovalRow | undefined> {
  return db
    .updateTable('approvals')
    .set({
      status: resolution.status,
      resolved_by: resolution.resolvedBy,
      resolved_at: resolution.now,
      note: resolution.note,
      updated_at: resolution.now,
    })
    .where('id', '=', approvalId)
    .where('status', '=', 'pending')
    .where('expires_at', '>', resolution.now)
    .returningAll()
    .executeTakeFirst();
}

/** Every pending approval whose deadline has passed becomes `expired`; returns those rows. */
export function expireDueApprovals(db: Db, now: Date): Promise<ApprovalRow[]> {
  return db
    .updateTable('approvals')
    .set({ status: 'expired', updated_at: now })
    .where('status', '=', 'pending')
    .where('expires_at', '<=', now)
    .returningAll()
    .execute();
}

/**
 * The run (assistant message) parked on its pending approvals has ended without them (aborted,
 * crashed, or its node died): nothing is left to resume, so they can no longer be granted. Answers
 * how many were pending.
 */
export async function expireApprovalsOfMessage(db: Db, messageId: string, now: Date): Promise<number> {
  const result = await db
    .updateTable('approvals')
    .set({ status: 'expired', updated_at: now })
    .where('message_id', '=', messageId)
    .where('status', '=', 'pending')
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

export function findApproverKey(db: Db, keyId: string) {
  return db.selectFrom('approver_keys').selectAll().where('id', '=', keyId).executeTakeFirst();
}
