import type { z } from 'zod';
import { pendingApprovalIds } from '../approvals/approvals.repository.js';
import { json } from '../core/db/database.js';
import type { SkillAccess, TenantSettings } from '../core/db/schema.js';
import type { AppDeps } from '../deps.js';
import { changedFields, isEmpty } from '../core/merge.js';
import { type PageRequest, paginate } from '../core/pagination.js';
import type { ServicePrincipal, UserPrincipal } from '../core/principal.js';
import { ProblemError, problems } from '../core/problems.js';
import { isKnownAgentType } from '../sandboxes/agent-types.js';
import { listSkillIds } from '../skills/skills.repository.js';
import { effectiveRepositoryId, findTenant } from '../tenants/tenants.repository.js';
import { findUser } from '../users/users.repository.js';
import {
  type ConversationRow,
  deleteConversation,
  findConversation,
  findConversationByExternalId,
  findOwner,
  insertConversationIfAbsent,
  type OwnerRow,
  type ScopedConversationRow,
  updateConversation,
} from './conversations.repository.js';
import {
  type Conversation,
  type CreateConversationBody,
  DEFAULT_IDLE_TTL_SECONDS,
  type PatchConversationBody,
  type UpsertConversationBody,
} from './conversations.schemas.js';

type Caller = ServicePrincipal | UserPrincipal;

export function presentConversation(row: ConversationRow): z.output<typeof Conversation> {
  return {
    object: 'conversation',
    id: row.id,
    external_id: row.external_id,
    tenant_id: row.tenant_id,
    user_id: row.user_id,
    title: row.title,
    status: row.status,
    context: row.context,
    selected_skill_ids: row.selected_skill_ids,
    runtime: {
      agent_type: row.agent_type,
      mode: row.mode,
      idle_ttl_seconds: row.idle_ttl_seconds,
      sandbox_state: row.sandbox_state,
      expires_at: row.sandbox_expires_at ? row.sandbox_expires_at.toISOString() : null,
    },
    filler: row.filler,
    storage: row.storage,
    message_count: row.message_count,
    last_message_at: row.last_message_at ? row.last_message_at.toISOString() : null,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/**
 * A conversation the caller may see: the service key sees its whole subtree, a platform JWT only
 * its own user's conversations. Another integration's conversation is 404; another user's, under a
 * JWT, is 403 insufficient-scope (the spec's rule for a token reaching beyond its user).
 */
export async function getConversationInScope(deps: AppDeps, caller: Caller, conversationId: string) {
  const conversation = await findConversation(deps.db, conversationId);
  return checkScope(caller, conversation);
}

function checkScope(caller: Caller, conversation: ScopedConversationRow | undefined): ScopedConversationRow {
  if (!conversation || conversation.integration_id !== caller.integrationId) throw problems.notFound('conversation');
  if (caller.kind === 'user') {
    if (conversation.tenant_id !== caller.tenantId) throw problems.notFound('conversation');
    if (conversation.user_id !== caller.userId) throw problems.forbidden('The token reaches only its own user.');
  }
  return conversation;
}

export async function getConversationByExternalId(
  deps: AppDeps,
  caller: Caller,
  externalId: string,
  tenantId: string | undefined,
): Promise<ScopedConversationRow> {
  const tenant = caller.kind === 'user' ? caller.tenantId : tenantId;
  if (!tenant) {
    throw problems.badRequest([{ pointer: '/tenant_id', message: 'required with the service key' }]);
  }
  if (caller.kind === 'user' && tenantId !== undefined && tenantId !== caller.tenantId) {
    throw problems.forbidden('The token reaches only its own tenant.');
  }
  return checkScope(caller, await findConversationByExternalId(deps.db, tenant, externalId));
}

export function assertTenantWritable(tenantStatus: 'active' | 'suspended'): void {
  if (tenantStatus === 'suspended') {
    throw new ProblemError('tenant-suspended', 403, { detail: 'The tenant is suspended; reads keep working.' });
  }
}

export function assertConversationActive(conversation: { status: 'active' | 'archived' }): void {
  if (conversation.status === 'archived') {
    throw new ProblemError('conversation-archived', 409, { detail: 'The conversation is archived.' });
  }
}

/** The user a new conversation belongs to, checked for scope, suspension and role. */
async function resolveOwner(deps: AppDeps, caller: Caller, userId: string | undefined): Promise<OwnerRow> {
  if (caller.kind === 'user' && userId !== undefined && userId !== caller.userId) {
    throw problems.forbidden('The token reaches only its own user.');
  }
  const id = caller.kind === 'user' ? caller.userId : userId;
  if (!id) throw problems.invalid([{ pointer: '/user_id', message: 'required' }]);
  const owner = await findOwner(deps.db, id);
  if (!owner || owner.integration_id !== caller.integrationId) throw problems.notFound('user');
  assertTenantWritable(owner.tenant_status);
  return owner;
}

function assertCanStart(owner: OwnerRow): asserts owner is OwnerRow & { role_id: string; skill_access: SkillAccess } {
  if (owner.user_status === 'suspended') throw problems.forbidden('The user is deactivated.');
  if (!owner.role_id || !owner.skill_access) {
    throw new ProblemError('role-required', 422, { detail: 'The user has no role; assign one before starting conversations.' });
  }
}

/** The context snapshot: the user's role, the tenant's effective repository, the skills the role grants there. */
async function snapshotContext(deps: AppDeps, owner: OwnerRow & { role_id: string; skill_access: SkillAccess }) {
  const repositoryId = await effectiveRepositoryId(deps.db, owner.tenant_id);
  let skillIds = repositoryId ? await listSkillIds(deps.db, repositoryId) : [];
  if (owner.skill_access.mode === 'selected') {
    const granted = new Set(owner.skill_access.skill_ids);
    skillIds = skillIds.filter((id) => granted.has(id));
  }
  return { role_id: owner.role_id, repository_id: repositoryId, skill_ids: skillIds };
}

function checkSelectedSkills(selected: string[] | null | undefined, available: string[]): void {
  if (!selected) return;
  const allowed = new Set(available);
  const errors = selected
    .map((id, index) => ({ id, index }))
    .filter(({ id }) => !allowed.has(id))
    .map(({ index }) => ({ pointer: `/selected_skill_ids/${index}`, message: "not among the conversation's skills" }));
  if (errors.length > 0) throw problems.invalid(errors);
}

interface RuntimeInput {
  agent_type?: string | undefined;
  mode?: 'pooled' | 'warm' | undefined;
  idle_ttl_seconds?: number | undefined;
}

interface RuntimeFields {
  agent_type: string;
  mode: 'pooled' | 'warm';
  idle_ttl_seconds: number | null;
}

/** Runtime rules: agent type from tenant settings and immutable; TTL only in warm mode, capped by the tenant. */
export function resolveRuntime(input: RuntimeInput | undefined, settings: TenantSettings, current?: RuntimeFields): RuntimeFields {
  const requestedType = input?.agent_type;
  if (current && requestedType !== undefined && requestedType !== current.agent_type) {
    throw problems.invalid([{ pointer: '/runtime/agent_type', message: 'agent_type cannot change after creation' }]);
  }
  const agentType = current?.agent_type ?? requestedType ?? settings.default_agent_type;
  if (!current && !isKnownAgentType(agentType)) {
    throw problems.invalid([{ pointer: requestedType ? '/runtime/agent_type' : '/runtime', message: `unknown agent type ${agentType}` }]);
  }
  const requestedTtl = input?.idle_ttl_seconds;
  if (requestedTtl !== undefined && requestedTtl > settings.max_idle_ttl_seconds) {
    throw problems.invalid([
      {
        pointer: '/runtime/idle_ttl_seconds',
        message: `above the tenant's max_idle_ttl_seconds (${settings.max_idle_ttl_seconds})`,
      },
    ]);
  }
  const mode = input?.mode ?? current?.mode ?? 'pooled';
  const idleTtl =
    mode === 'pooled'
      ? null
      : (requestedTtl ?? current?.idle_ttl_seconds ?? Math.min(DEFAULT_IDLE_TTL_SECONDS, settings.max_idle_ttl_seconds));
  return { agent_type: agentType, mode, idle_ttl_seconds: idleTtl };
}

type CreateFields = Omit<z.output<typeof CreateConversationBody>, 'user_id' | 'on_capacity'>;

async function newConversationRow(deps: AppDeps, owner: OwnerRow, fields: CreateFields) {
  assertCanStart(owner);
  const context = await snapshotContext(deps, owner);
  checkSelectedSkills(fields.selected_skill_ids, context.skill_ids);
  const runtime = resolveRuntime(fields.runtime, owner.settings);
  const id = deps.newId('conversation');
  const now = deps.now();
  return {
    id,
    tenant_id: owner.tenant_id,
    user_id: owner.user_id,
    external_id: fields.external_id ?? null,
    title: fields.title ?? null,
    status: 'active' as const,
    context: json(context),
    selected_skill_ids: fields.selected_skill_ids ? json(fields.selected_skill_ids) : null,
    agent_type: runtime.agent_type,
    mode: runtime.mode,
    idle_ttl_seconds: runtime.idle_ttl_seconds,
    sandbox_state: 'cold' as const,
    sandbox_expires_at: null,
    filler: fields.filler ? json(fields.filler) : null,
    storage: json({
      provider: 'platform',
      bucket_uri: `s3://${deps.config.storageBucket}/tenants/${owner.tenant_id}/conversations/${id}/`,
    }),
    session_id: null,
    message_count: 0,
    last_message_at: null,
    metadata: json(fields.metadata ?? {}),
    created_at: now,
    updated_at: now,
  };
}

export async function createConversation(
  deps: AppDeps,
  caller: Caller,
  body: z.output<typeof CreateConversationBody>,
): Promise<ConversationRow> {
  const owner = await resolveOwner(deps, caller, body.user_id);
  const row = await newConversationRow(deps, owner, body);
  const created = await insertConversationIfAbsent(deps.db, row);
  if (created) return created;
  const holder = await findConversationByExternalId(deps.db, owner.tenant_id, row.external_id ?? '');
  throw problems.externalIdConflict(holder?.id, 'A conversation with this external_id exists in the tenant.');
}

/**
 * Continue-vs-create by the host's conversation id. Under the service key the tenant comes from
 * `user_id` (required on every call); under a JWT from the token. Concurrent calls collapse on the
 * (tenant, external id) constraint: one 201, the others 200.
 */
export async function upsertConversation(
  deps: AppDeps,
  caller: Caller,
  externalId: string,
  body: z.output<typeof UpsertConversationBody>,
): Promise<{ created: boolean; conversation: ScopedConversationRow }> {
  const owner = await resolveOwner(deps, caller, body.user_id);
  let existing = await findConversationByExternalId(deps.db, owner.tenant_id, externalId);
  if (!existing) {
    const row = await newConversationRow(deps, owner, { ...body, external_id: externalId });
    const created = await insertConversationIfAbsent(deps.db, row);
    existing = await findConversationByExternalId(deps.db, owner.tenant_id, externalId);
    if (!existing) throw new Error('conversation vanished between a conflicting insert and its read');
    if (created) return { created: true, conversation: existing };
  }
  if (existing.user_id !== owner.user_id) {
    if (caller.kind === 'user') throw problems.forbidden('The token reaches only its own user.');
    throw problems.invalid([{ pointer: '/user_id', message: 'user_id cannot change after creation' }]);
  }
  // An archived conversation refuses the message before anything else of the call is merged.
  if (body.initial_message) assertConversationActive(existing);
  const updated = await applyChanges(deps, existing, body);
  return { created: false, conversation: { ...existing, ...updated } };
}

export async function patchConversation(
  deps: AppDeps,
  caller: Caller,
  conversationId: string,
  body: z.output<typeof PatchConversationBody>,
): Promise<ConversationRow> {
  const conversation = await getConversationInScope(deps, caller, conversationId);
  assertTenantWritable(conversation.tenant_status);
  return applyChanges(deps, conversation, body);
}

async function applyChanges(
  deps: AppDeps,
  conversation: ScopedConversationRow,
  patch: z.output<typeof PatchConversationBody>,
): Promise<ConversationRow> {
  checkSelectedSkills(patch.selected_skill_ids, conversation.context.skill_ids);
  const runtime = patch.runtime === undefined ? undefined : resolveRuntime(patch.runtime, conversation.tenant_settings, conversation);
  const changes = changedFields(conversation, {
    title: patch.title,
    status: patch.status,
    selected_skill_ids: patch.selected_skill_ids,
    filler: patch.filler,
    metadata: patch.metadata,
    mode: runtime?.mode,
    idle_ttl_seconds: runtime?.idle_ttl_seconds,
  });
  if (isEmpty(changes)) return conversation;
  return updateConversation(deps.db, conversation.id, {
    ...(changes.title !== undefined && { title: changes.title }),
    ...(changes.status !== undefined && { status: changes.status }),
    ...(changes.selected_skill_ids !== undefined && {
      selected_skill_ids: changes.selected_skill_ids === null ? null : json(changes.selected_skill_ids),
    }),
    ...(changes.filler !== undefined && { filler: changes.filler === null ? null : json(changes.filler) }),
    ...(changes.metadata !== undefined && { metadata: json(changes.metadata) }),
    ...(changes.mode !== undefined && { mode: changes.mode }),
    ...(changes.idle_ttl_seconds !== undefined && { idle_ttl_seconds: changes.idle_ttl_seconds }),
    updated_at: deps.now(),
  });
}

export async function removeConversation(deps: AppDeps, conversation: ScopedConversationRow): Promise<void> {
  assertTenantWritable(conversation.tenant_status);
  const parkedOn = await pendingApprovalIds(deps.db, conversation.id);
  await deleteConversation(deps.db, conversation.id);
  // A warm runner would otherwise stay held (counting against capacity and the tenant's cap) until its TTL.
  await deps.runtime.provider.discardConversation(conversation.id);
  // A run parked on an approval ends now, on whichever node parks it, rather than at its next re-read.
  for (const approvalId of parkedOn) await deps.runtime.approvals.announce(approvalId);
}

export async function listConversations(
  deps: AppDeps,
  caller: Caller,
  query: PageRequest & { user_id?: string | undefined; tenant_id?: string | undefined },
) {
  let q = deps.db
    .selectFrom('conversations')
    .innerJoin('tenants', 'tenants.id', 'conversations.tenant_id')
    .selectAll('conversations')
    .where('tenants.integration_id', '=', caller.integrationId);
  if (caller.kind === 'user') {
    if (query.tenant_id !== undefined || query.user_id !== caller.userId) {
      throw problems.forbidden('The token reaches only its own user.');
    }
  } else {
    await requireFilterInScope(deps, caller, query);
  }
  if (query.user_id) q = q.where('conversations.user_id', '=', query.user_id);
  if (query.tenant_id) q = q.where('conversations.tenant_id', '=', query.tenant_id);
  return paginate(q, 'conversations.id', query);
}

/**
 * A filter naming a user or tenant that does not exist, or lies outside the caller's integration, is
 * answered 404 as a GET of it would be: an empty list would hide a host adapter's typo.
 */
async function requireFilterInScope(
  deps: AppDeps,
  caller: ServicePrincipal,
  query: { user_id?: string | undefined; tenant_id?: string | undefined },
) {
  if (query.user_id && !(await findUser(deps.db, caller.integrationId, query.user_id))) throw problems.notFound('user');
  if (query.tenant_id && !(await findTenant(deps.db, caller.integrationId, query.tenant_id))) throw problems.notFound('tenant');
}
