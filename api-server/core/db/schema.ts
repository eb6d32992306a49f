import type { ColumnType } from 'kysely';

/** Row types of every table, for kysely. Migrations are the source of truth for the DDL. */

type Timestamp = ColumnType<Date, Date | string, Date | string>;
/** jsonb columns are written as JSON text (pg would turn JS arrays into SQL arrays) and read parsed. */
type Json<T> = ColumnType<T, string, string>;

export type Metadata = Record<string, string>;

export interface IntegrationsTable {
  id: string;
  name: string;
  root_tenant_id: string;
  created_at: Timestamp;
}

export interface ServiceKeysTable {
  id: string;
  integration_id: string;
  key_hash: string;
  hint: string;
  created_at: Timestamp;
  revoked_at: Timestamp | null;
}

export interface TenantSettings {
  filler_enabled: boolean;
  default_agent_type: string;
  max_idle_ttl_seconds: number;
  max_concurrent_warm: number;
  /** null (and absent, in rows written before migration 0014): the deployment default. */
  max_busy_sandboxes: number | null;
  max_busy_sandboxes_per_user: number | null;
}

export interface TenantsTable {
  id: string;
  integration_id: string;
  parent_id: string | null;
  external_id: string | null;
  name: string | null;
  status: 'active' | 'suspended';
  repository_id: string | null;
  settings: Json<TenantSettings>;
  metadata: Json<Metadata>;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** The tenant as the API presents it: JSON text that a trigger renders on every write (migration 0010). */
  api_json: ColumnType<string, never, never>;
}

export interface Storage {
  provider: 'platform' | 'external';
  bucket_uri: string;
}

export interface UsersTable {
  id: string;
  tenant_id: string;
  external_id: string;
  email: string | null;
  display_name: string | null;
  status: 'active' | 'suspended';
  role_id: string | null;
  storage: Json<Storage>;
  metadata: Json<Metadata>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type SkillAccess = { mode: 'all' } | { mode: 'selected'; skill_ids: string[] };

export interface RolesTable {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  skill_access: Json<SkillAccess>;
  repository_id: string | null;
  metadata: Json<Metadata>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type SyncState = 'pending' | 'syncing' | 'ready' | 'error';

/** One thing a repository scan skipped, as the repository's sync details show it. */
export interface SyncWarning {
  kind: 'invalid_manifest' | 'duplicate_name' | 'manual_conflict' | 'limit';
  /** The manifest concerned, if any. */
  path: string | null;
  name: string | null;
  message: string;
}

export interface RepositoriesTable {
  id: string;
  integration_id: string;
  name: string;
  repo_url: string;
  branch: string;
  provider: string;
  credential_id: string | null;
  sync_state: SyncState;
  sync_last_synced_at: Timestamp | null;
  sync_error: string | null;
  /** What the last scan skipped: invalid manifests, duplicate names, names held by manual skills (migration 0004). */
  sync_warnings: ColumnType<SyncWarning[], string | undefined, string>;
  /** The commit of the last successful scan, whose content runs use. */
  sync_commit: ColumnType<string | null, string | null | undefined, string | null>;
  /** The attempt in flight (random per claim) and the API node running it, while `syncing`. */
  sync_claim: ColumnType<string | null, string | null | undefined, string | null>;
  sync_node_id: ColumnType<string | null, string | null | undefined, string | null>;
  sync_started_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** A push arrived while a sync was in flight: one more sync runs when it ends (migration 0008). */
  sync_requested: ColumnType<boolean, boolean | undefined, boolean>;
  /** The remote's SSH host keys (known_hosts lines), pinned at the first SSH sync (migration 0016). */
  ssh_known_hosts: ColumnType<string | null, string | null | undefined, string | null>;
  metadata: Json<Metadata>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** GitHub deliveries already acted on (migration 0008). */
export interface WebhookDeliveriesTable {
  /** SHA-256 of the delivery's signed body (migration 0012; before it, the unsigned delivery id). */
  body_digest: string;
  received_at: Timestamp;
}

/** The run a runner pod's egress credential stands for while a turn runs on it (migration 0009). */
export interface RunnerEgressTable {
  runner_id: string;
  token_digest: Buffer;
  run_id: string;
  node_id: string;
  updated_at: Timestamp;
}

/** A conversation's workspace archive, kept between its sandboxes under the kubernetes provider (migration 0009). */
export interface ConversationWorkspacesTable {
  conversation_id: string;
  archive: Buffer;
  updated_at: Timestamp;
}

/** A file's content, addressed by the hex SHA-256 of its bytes (migration 0007). */
export interface ContentBlobsTable {
  digest: string;
  data: Buffer;
  size: number;
}

/** One file of one skill directory in one synced commit (migration 0007). */
export interface SkillFilesTable {
  repository_id: string;
  commit: string;
  /** The directory holding the skill's SKILL.md, `/`-separated, relative to the repository root ('' for the root). */
  skill_dir: string;
  /** The file's path inside skill_dir, `/`-separated. */
  path: string;
  digest: string;
  executable: boolean;
}

export interface SkillsTable {
  id: string;
  repository_id: string;
  name: string;
  description: string | null;
  version: string | null;
  path: string | null;
  source: 'discovered' | 'manual';
  metadata: Json<Metadata>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CredentialsTable {
  id: string;
  integration_id: string;
  name: string;
  type: string;
  secret_ciphertext: string;
  metadata: Json<Metadata>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ApproverKeysTable {
  id: string;
  tenant_id: string;
  algorithm: 'hmac-sha256' | 'ed25519';
  secret_ciphertext: string | null;
  public_key: string | null;
  created_at: Timestamp;
  revoked_at: Timestamp | null;
}

export interface ApprovalItem {
  kind: 'action' | 'secret';
  description: string;
  alias?: string;
}

export interface ApprovalsTable {
  id: string;
  tenant_id: string;
  conversation_id: string;
  message_id: string;
  status: 'pending' | 'approved' | 'denied' | 'expired';
  reason: string;
  requested_items: Json<ApprovalItem[]>;
  expires_at: Timestamp;
  resolved_by: string | null;
  resolved_at: Timestamp | null;
  note: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface IdempotencyKeysTable {
  principal: string;
  operation: string;
  key: string;
  request_hash: string;
  state: 'in_flight' | 'done';
  response_status: number | null;
  response_body: Json<unknown> | null;
  response_headers: Json<Record<string, string>> | null;
  created_at: Timestamp;
  expires_at: Timestamp;
}

export interface ConversationContext {
  role_id: string;
  repository_id: string | null;
  skill_ids: string[];
}

export interface Filler {
  enabled: boolean;
}

export interface ConversationsTable {
  id: string;
  tenant_id: string;
  user_id: string;
  external_id: string | null;
  title: string | null;
  status: 'active' | 'archived';
  context: Json<ConversationContext>;
  selected_skill_ids: Json<string[]> | null;
  agent_type: string;
  mode: 'pooled' | 'warm';
  idle_ttl_seconds: number | null;
  sandbox_state: 'warm' | 'cold';
  sandbox_expires_at: Timestamp | null;
  filler: Json<Filler> | null;
  storage: Json<Storage>;
  /** The agent runtime's session id, for resuming on another runner. */
  session_id: string | null;
  message_count: ColumnType<number, number | undefined, number>;
  last_message_at: Timestamp | null;
  metadata: Json<Metadata>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface MessagePart {
  type: string;
  text?: string;
  [key: string]: unknown;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
}

export interface MessagesTable {
  id: string;
  conversation_id: string;
  role: 'user' | 'assistant' | 'system';
  content: string;
  parts: Json<MessagePart[]> | null;
  skill_ids: Json<string[]> | null;
  env: Json<Record<string, string>> | null;
  status: 'completed' | 'in_progress' | 'failed';
  usage: Json<Usage> | null;
  metadata: Json<Metadata>;
  /** The API server process hosting the run while it is in progress. */
  node_id: string | null;
  /** An assistant message in progress that holds one of its tenant's busy-sandbox places (false while held for capacity). */
  sandbox_admitted: ColumnType<boolean, boolean | undefined, boolean>;
  /** The request that created the message (its X-Request-Id); null for messages stored before it was kept. */
  request_id: ColumnType<string | null, string | null | undefined, never>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface RunLinesTable {
  message_id: string;
  seq: number;
  line: Json<unknown>;
  /** The runner link's number of the runner line this line came from; null for the platform's own lines. */
  link_seq: ColumnType<number | null, number | null | undefined, number | null>;
  created_at: Timestamp;
}

export interface AgentSessionEntriesTable {
  conversation_id: string;
  session_key: string;
  seq: ColumnType<string, never, never>;
  entry_uuid: string | null;
  entry: Json<unknown>;
}

export interface NodesTable {
  id: string;
  started_at: Timestamp;
  heartbeat_at: Timestamp;
}

export type SecretScope = 'tenant' | 'user' | 'conversation' | 'run';

/** A vaulted secret; `scope_id` is the owning tenant, user, conversation, or (scope `run`) assistant message. */
export interface SecretsTable {
  scope: SecretScope;
  scope_id: string;
  alias: string;
  value_ciphertext: string;
  /** The destinations the value may be sent to; null: unbound. Part of the ciphertext's context. */
  allowed_hosts: string[] | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** Generated from scope and scope_id, for the cascading foreign keys. */
  tenant_id: ColumnType<string | null, never, never>;
  user_id: ColumnType<string | null, never, never>;
  conversation_id: ColumnType<string | null, never, never>;
  message_id: ColumnType<string | null, never, never>;
}

/** A rate-limit bucket (`class|principal`) and the requests reserved in its current window. */
export interface RateLimitWindowsTable {
  bucket: string;
  window_started_at: Timestamp;
  used: number;
}

export interface Database {
  integrations: IntegrationsTable;
  service_keys: ServiceKeysTable;
  tenants: TenantsTable;
  users: UsersTable;
  roles: RolesTable;
  repositories: RepositoriesTable;
  skills: SkillsTable;
  credentials: CredentialsTable;
  approver_keys: ApproverKeysTable;
  idempotency_keys: IdempotencyKeysTable;
  conversations: ConversationsTable;
  messages: MessagesTable;
  run_lines: RunLinesTable;
  agent_session_entries: AgentSessionEntriesTable;
  nodes: NodesTable;
  secrets: SecretsTable;
  approvals: ApprovalsTable;
  content_blobs: ContentBlobsTable;
  skill_files: SkillFilesTable;
  webhook_deliveries: WebhookDeliveriesTable;
  rate_limit_windows: RateLimitWindowsTable;
  runner_egress: RunnerEgressTable;
  conversation_workspaces: ConversationWorkspacesTable;
}
