import { ConversationIdParams } from '../conversations/conversations.schemas.js';
import { defineRoute } from '../define-route.js';
import { ApprovalIdParams, Approval, ApprovalList, ListApprovalsQuery, ResolveApprovalBody } from './approvals.schemas.js';
import { getApproval, listConversationApprovals, resolveApproval } from './approvals.service.js';

const tag = 'Approvals';
const common = {
  401: { description: 'Missing or invalid credential' },
  404: { description: 'No such approval (or conversation) within reach' },
};

function resolveRoute(decision: 'approve' | 'deny') {
  const verb = decision === 'approve' ? 'approve' : 'deny';
  return defineRoute({
    method: 'post',
    path: `/approvals/:approval_id/${verb}`,
    operationId: `${verb}Approval`,
    summary:
      decision === 'approve'
        ? 'Approve with a signed assertion: the parked run resumes (stream: resumed, then message_end); secrets are vaulted at conversation scope'
        : 'Deny with a signed assertion (decision "deny"): the agent is told and continues',
    tag,
    auth: 'service-or-user',
    params: ApprovalIdParams,
    body: ResolveApprovalBody,
    bodyExample: {
      signature: {
        key_id: 'apk_01JD4Z8K5M2N3P4Q5R6S7T8V9W',
        algorithm: 'hmac-sha256',
        exp: 1893456000,
        value: 'c2lnbmF0dXJlLW9mLXRoZS1hcHByb3ZhbA',
      },
      note: decision === 'approve' ? 'Approved by the on-call lead' : 'Not this quarter',
    },
    idempotent: true,
    responses: {
      200: { description: `The approval, ${decision === 'approve' ? 'approved' : 'denied'}`, schema: Approval },
      ...common,
      403: { description: 'The signature does not verify (approval-signature-invalid), or beyond the token’s user' },
      409: { description: 'Already resolved or past its expiry (approval-expired)' },
      422: { description: 'Invalid body, or a secret under an alias the approval did not request' },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: await resolveApproval(deps, principal, params.approval_id, decision, body),
    }),
  });
}

export const approvalRoutes = [
  defineRoute({
    method: 'get',
    path: '/approvals/:approval_id',
    operationId: 'getApproval',
    summary: 'Get an approval',
    tag,
    auth: 'service-or-user',
    params: ApprovalIdParams,
    responses: {
      200: { description: 'The approval', schema: Approval },
      ...common,
      403: { description: 'Beyond the token’s user' },
    },
    handler: async ({ deps, principal, params }) => ({ status: 200, body: await getApproval(deps, principal, params.approval_id) }),
  }),
  defineRoute({
    method: 'get',
    path: '/conversations/:conversation_id/approvals',
    operationId: 'listConversationApprovals',
    summary: "List a conversation's approvals, newest first",
    tag,
    auth: 'service-or-user',
    params: ConversationIdParams,
    query: ListApprovalsQuery,
    responses: {
      200: { description: 'A page', schema: ApprovalList },
      400: { description: 'Bad query' },
      ...common,
      403: { description: 'Beyond the token’s user' },
    },
    handler: async ({ deps, principal, params, query }) => ({
      status: 200,
      body: await listConversationApprovals(deps, principal, params.conversation_id, query),
    }),
  }),
  resolveRoute('approve'),
  resolveRoute('deny'),
];
