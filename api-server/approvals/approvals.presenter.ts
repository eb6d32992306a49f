import type { z } from 'zod';
import type { ApprovalRow } from './approvals.repository.js';
import type { Approval } from './approvals.schemas.js';

export function presentApproval(row: ApprovalRow): z.output<typeof Approval> {
  return {
    object: 'approval',
    id: row.id,
    tenant_id: row.tenant_id,
    conversation_id: row.conversation_id,
    message_id: row.message_id,
    status: row.status,
    reason: row.reason,
    requested_items: row.requested_items,
    expires_at: row.expires_at.toISOString(),
    resolved_by: row.resolved_by,
    resolved_at: row.resolved_at ? row.resolved_at.toISOString() : null,
    note: row.note,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
