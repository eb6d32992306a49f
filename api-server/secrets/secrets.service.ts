import { isForeignKeyViolation } from '../core/db/database.js';
import type { AppDeps } from '../deps.js';
import { type Page, type PageRequest, mapPage } from '../core/pagination.js';
import type { ServicePrincipal, UserPrincipal } from '../core/principal.js';
import { ProblemError, problems } from '../core/problems.js';
import { assertConversationActive, assertTenantWritable, getConversationInScope } from '../conversations/conversations.service.js';
import { getTenantInScope } from '../tenants/tenants.service.js';
import { getUserInScope } from '../users/users.service.js';
import { placeholderFor } from '../../egress-proxy/placeholder.js';
import type { RunSecret } from '../../egress-proxy/secret-binding.js';
import type { SecretInput } from './secrets.schemas.js';
import { findSecretReferences } from './placeholders.js';
import {
  deleteSecret,
  listAllSecrets,
  type Owner,
  pageSecrets,
  type SecretListRow,
  selectVisibleSecrets,
  upsertSecrets,
} from './secrets.repository.js';

type Caller = ServicePrincipal | UserPrincipal;
type SecretKind = 'conversation.secret' | 'user.secret' | 'tenant.secret';
export type SecretObject<K extends SecretKind = SecretKind> = {
  object: K;
  alias: string;
  allowed_hosts: string[] | null;
  created_at: string;
  updated_at: string;
};

/** Alias to value (plain, or bound to its hosts), as a run resolves them. */
export type SecretValues = ReadonlyMap<string, RunSecret>;

export function presentSecret<K extends SecretKind>(kind: K) {
  return (row: SecretListRow): SecretObject<K> => ({
    object: kind,
    alias: row.alias,
    allowed_hosts: row.allowed_hosts,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  });
}

/**
 * The AAD of a secret's ciphertext: it only decrypts as this alias of this owner, and, when bound, with
 * these very hosts, so a database writer cannot widen a binding without the master key.
 */
export function secretContext(owner: Owner, alias: string, allowedHosts: readonly string[] | null = null): string {
  const base = `secret:${owner.scope}:${owner.id}:${alias}`;
  return allowedHosts === null ? base : `${base}:hosts:${JSON.stringify(allowedHosts)}`;
}

/** A secret as written, as a run holds it. */
export function toRunSecret(input: SecretInput): RunSecret {
  return typeof input === 'string' ? input : { value: input.value, allowedHosts: input.allowed_hosts };
}

export function sealSecrets(deps: Pick<AppDeps, 'vault'>, owner: Owner, values: Record<string, SecretInput>) {
  return Object.entries(values).map(([alias, input]) => {
    const [value, allowedHosts] = typeof input === 'string' ? [input, null] : [input.value, input.allowed_hosts];
    return { alias, value_ciphertext: deps.vault.encrypt(value, secretContext(owner, alias, allowedHosts)), allowed_hosts: allowedHosts };
  });
}

/**
 * With ACIS_SECRETS_REQUIRE_HOSTS=1, the secret-hosts-required problem of a `secrets` map holding a plain
 * string value (each listed by pointer under `pointer`), else undefined.
 */
export function unboundSecretsProblem(
  deps: Pick<AppDeps, 'config'>,
  values: Record<string, SecretInput> | undefined,
  pointer: string,
): ProblemError | undefined {
  if (!deps.config.secretsRequireHosts || !values) return undefined;
  const unbound = Object.keys(values).filter((alias) => typeof values[alias] === 'string');
  if (unbound.length === 0) return undefined;
  return new ProblemError('secret-hosts-required', 422, {
    detail:
      `This deployment requires every secret to name its destinations: send ${unbound.join(', ')} as ` +
      '{"value": "...", "allowed_hosts": ["api.example.com"]}.',
    errors: unbound.map((alias) => ({ pointer: `${pointer}/${alias}`, message: 'a plain string value is refused: give allowed_hosts' })),
  });
}

export function assertSecretsBound(deps: Pick<AppDeps, 'config'>, values: Record<string, SecretInput> | undefined, pointer: string): void {
  const problem = unboundSecretsProblem(deps, values, pointer);
  if (problem) throw problem;
}

/** Merge-upserts and answers the owner's whole list (the spec's PUT answers the list). */
async function putSecrets(deps: AppDeps, owner: Owner, values: Record<string, SecretInput>, what: string): Promise<Page<SecretListRow>> {
  assertSecretsBound(deps, values, '/secrets');
  try {
    await upsertSecrets(deps.db, owner, sealSecrets(deps, owner, values), deps.now());
  } catch (error) {
    // The owner was deleted since it was looked up.
    if (isForeignKeyViolation(error)) throw problems.notFound(what);
    throw error;
  }
  const rows = await listAllSecrets(deps.db, owner);
  return { object: 'list', data: rows, has_more: false, next_cursor: null };
}

async function removeSecret(deps: AppDeps, owner: Owner, alias: string): Promise<void> {
  if (!(await deleteSecret(deps.db, owner, alias))) throw problems.notFound('secret');
}

// Conversation scope: the service key, or the owning user's platform JWT. Writes follow the rules
// of every conversation write (tenant suspended: 403; archived: 409); reads always work.

async function conversationOwner(deps: AppDeps, caller: Caller, conversationId: string, write: boolean): Promise<Owner> {
  const conversation = await getConversationInScope(deps, caller, conversationId);
  if (write) {
    assertTenantWritable(conversation.tenant_status);
    assertConversationActive(conversation);
  }
  return { scope: 'conversation', id: conversation.id };
}

const presentConversationSecret = presentSecret('conversation.secret');

export async function putConversationSecrets(deps: AppDeps, caller: Caller, conversationId: string, values: Record<string, SecretInput>) {
  const owner = await conversationOwner(deps, caller, conversationId, true);
  return mapPage(await putSecrets(deps, owner, values, 'conversation'), presentConversationSecret);
}

export async function listConversationSecrets(deps: AppDeps, caller: Caller, conversationId: string, page: PageRequest) {
  const owner = await conversationOwner(deps, caller, conversationId, false);
  return mapPage(await pageSecrets(deps.db, owner, page), presentConversationSecret);
}

export async function deleteConversationSecret(deps: AppDeps, caller: Caller, conversationId: string, alias: string) {
  await removeSecret(deps, await conversationOwner(deps, caller, conversationId, true), alias);
}

// User and tenant scopes: provisioning, so the service key only, within its subtree.

async function userOwner(deps: AppDeps, principal: ServicePrincipal, userId: string): Promise<Owner> {
  return { scope: 'user', id: (await getUserInScope(deps, principal, userId)).id };
}

async function tenantOwner(deps: AppDeps, principal: ServicePrincipal, tenantId: string): Promise<Owner> {
  return { scope: 'tenant', id: (await getTenantInScope(deps, principal, tenantId)).id };
}

const presentUserSecret = presentSecret('user.secret');
const presentTenantSecret = presentSecret('tenant.secret');

export async function putUserSecrets(deps: AppDeps, principal: ServicePrincipal, userId: string, values: Record<string, SecretInput>) {
  return mapPage(await putSecrets(deps, await userOwner(deps, principal, userId), values, 'user'), presentUserSecret);
}

export async function listUserSecrets(deps: AppDeps, principal: ServicePrincipal, userId: string, page: PageRequest) {
  return mapPage(await pageSecrets(deps.db, await userOwner(deps, principal, userId), page), presentUserSecret);
}

export async function deleteUserSecret(deps: AppDeps, principal: ServicePrincipal, userId: string, alias: string) {
  await removeSecret(deps, await userOwner(deps, principal, userId), alias);
}

export async function putTenantSecrets(deps: AppDeps, principal: ServicePrincipal, tenantId: string, values: Record<string, SecretInput>) {
  return mapPage(await putSecrets(deps, await tenantOwner(deps, principal, tenantId), values, 'tenant'), presentTenantSecret);
}

export async function listTenantSecrets(deps: AppDeps, principal: ServicePrincipal, tenantId: string, page: PageRequest) {
  return mapPage(await pageSecrets(deps.db, await tenantOwner(deps, principal, tenantId), page), presentTenantSecret);
}

export async function deleteTenantSecret(deps: AppDeps, principal: ServicePrincipal, tenantId: string, alias: string) {
  await removeSecret(deps, await tenantOwner(deps, principal, tenantId), alias);
}

// Runs.

interface RunScopes {
  /** The run (its assistant message); undefined before the run exists. */
  runId: string | undefined;
  conversation: { id: string; user_id: string; tenant_id: string };
}

/**
 * The secrets a run sees, alias to value, by precedence: the run's own (a message's `secrets`),
 * then the conversation's, the user's, the tenant's, and the tenant's ancestors' nearest first.
 * `extra` stands in for the run scope before it is vaulted (a send being checked).
 */
export async function resolveRunSecrets(
  deps: Pick<AppDeps, 'db' | 'vault'>,
  scopes: RunScopes,
  extra: Record<string, SecretInput> = {},
): Promise<Map<string, RunSecret>> {
  const rows = await selectVisibleSecrets(deps.db, {
    runId: scopes.runId,
    conversationId: scopes.conversation.id,
    userId: scopes.conversation.user_id,
    tenantId: scopes.conversation.tenant_id,
  });
  const winners = new Map<string, (typeof rows)[number]>();
  for (const row of rows) {
    const current = winners.get(row.alias);
    if (!current || row.rank < current.rank) winners.set(row.alias, row);
  }
  const values = new Map(Object.entries(extra).map(([alias, input]) => [alias, toRunSecret(input)]));
  for (const [alias, row] of winners) {
    if (values.has(alias)) continue;
    const value = deps.vault.decrypt(row.value_ciphertext, secretContext({ scope: row.scope, id: row.scope_id }, alias, row.allowed_hosts));
    values.set(alias, row.allowed_hosts === null ? value : { value, allowedHosts: row.allowed_hosts });
  }
  return values;
}

/** Vaults a message's `secrets` for its run only (owner: the assistant message); deleted when the run ends. */
export function vaultRunSecrets(
  deps: Pick<AppDeps, 'db' | 'vault'>,
  runId: string,
  values: Record<string, SecretInput>,
  now: Date,
): Promise<void> {
  const owner: Owner = { scope: 'run', id: runId };
  return upsertSecrets(deps.db, owner, sealSecrets(deps, owner, values), now);
}

/**
 * The missing-secret problem of a send whose content, parts or env name an alias the run would not
 * resolve, or undefined. Every reference is listed with its JSON pointer.
 */
export function missingSecretProblem(
  message: { content: string; parts?: unknown[] | undefined; env?: Record<string, string> | undefined },
  available: SecretValues,
  bodyPointer = '',
): ProblemError | undefined {
  const missing = findSecretReferences(message, bodyPointer).filter((ref) => !available.has(ref.alias));
  if (missing.length === 0) return undefined;
  const aliases = [...new Set(missing.map((ref) => ref.alias))];
  return new ProblemError('missing-secret', 422, {
    detail:
      `No secret is vaulted under ${aliases.join(', ')} at any scope (message, conversation, user or tenant); ` +
      're-send the message with the secret attached.',
    errors: missing.map((ref) => ({ pointer: ref.pointer, message: `${placeholderFor(ref.alias)} names no vaulted secret` })),
  });
}

/**
 * A run as the egress proxy sees it: its alias-to-value map, the very map the run resolved when it is
 * hosted on this node (the same object for the life of the run), else resolved afresh while the run
 * is in progress on another node; and the id of the request that started it. Undefined once the run
 * has ended or for an unknown id.
 */
export async function runForEgress(deps: AppDeps, runId: string): Promise<{ secrets: SecretValues; requestId?: string } | undefined> {
  const live = deps.runtime.runs.liveRun(runId);
  if (live) return live;
  const run = await deps.db
    .selectFrom('messages')
    .innerJoin('conversations', 'conversations.id', 'messages.conversation_id')
    .select(['conversations.id', 'conversations.user_id', 'conversations.tenant_id', 'messages.request_id'])
    .where('messages.id', '=', runId)
    .where('messages.role', '=', 'assistant')
    .where('messages.status', '=', 'in_progress')
    .executeTakeFirst();
  if (!run) return undefined;
  const secrets = await resolveRunSecrets(deps, { runId, conversation: run });
  return run.request_id === null ? { secrets } : { secrets, requestId: run.request_id };
}
