// Generated from the OpenAPI document by `npm run client:generate` (hack/client-schema.ts). Do not edit.

export interface paths {
    "/admin/approver-keys/{approver_key_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Revoke an approver key */
        delete: operations["adminRevokeApproverKey"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/admin/integrations": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Create an integration: a root tenant and its first service key (shown once) */
        post: operations["adminCreateIntegration"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/admin/integrations/{integration_id}/service-keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Issue another service key for an integration (key rotation) */
        post: operations["adminCreateServiceKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/admin/service-keys/{service_key_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Revoke a service key */
        delete: operations["adminRevokeServiceKey"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/admin/tenants/{tenant_id}/approver-keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Register an approver key for a tenant (HMAC secret shown once, or an Ed25519 public key) */
        post: operations["adminCreateApproverKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/approvals/{approval_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get an approval */
        get: operations["getApproval"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/approvals/{approval_id}/approve": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Approve with a signed assertion: the parked run resumes (stream: resumed, then message_end); secrets are vaulted at conversation scope */
        post: operations["approveApproval"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/approvals/{approval_id}/deny": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Deny with a signed assertion (decision "deny"): the agent is told and continues */
        post: operations["denyApproval"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/auth/token-exchange": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Exchange a (tenant, user) external-id pair for a short-lived platform JWT */
        post: operations["exchangeToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/conversations": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the conversations of a user or of a tenant (exactly one of user_id, tenant_id) */
        get: operations["listConversations"];
        put?: never;
        /** Create a conversation and snapshot its context */
        post: operations["createConversation"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/conversations/{conversation_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a conversation */
        get: operations["getConversation"];
        put?: never;
        post?: never;
        /** Delete a conversation and its history */
        delete: operations["deleteConversation"];
        options?: never;
        head?: never;
        /** Update a conversation: title, status (archive), skills narrowing, runtime mode and TTL, filler, metadata */
        patch: operations["updateConversation"];
        trace?: never;
    };
    "/conversations/{conversation_id}/approvals": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List a conversation's approvals, newest first */
        get: operations["listConversationApprovals"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/conversations/{conversation_id}/messages": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the messages of a conversation, newest first */
        get: operations["listMessages"];
        put?: never;
        /** Append a user message and run the agent; streams NDJSON (stream=true) or blocks (stream=false) */
        post: operations["sendMessage"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/conversations/{conversation_id}/messages/{message_id}/stream": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Re-attach to a run: replay its lines after the first `after`, then follow it live to the terminal line */
        get: operations["reattachMessageStream"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/conversations/{conversation_id}/secrets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List a conversation's secrets by alias, A to Z (aliases and timestamps only) */
        get: operations["listConversationSecrets"];
        /** Vault conversation secrets: merge-upsert per alias (existing aliases overwritten, others untouched); values are write-only */
        put: operations["putConversationSecrets"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/conversations/{conversation_id}/secrets/{alias}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Remove a conversation secret */
        delete: operations["deleteConversationSecret"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/conversations/by-external-id/{external_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a conversation by external id (service key: with tenant_id) */
        get: operations["getConversationByExternalId"];
        /** Continue or create a conversation keyed on the host’s conversation id */
        put: operations["upsertConversation"];
        post?: never;
        /** Delete a conversation and its history by external id (service key: with tenant_id) */
        delete: operations["deleteConversationByExternalId"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/credentials": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the credentials of the integration registry, newest first */
        get: operations["listCredentials"];
        put?: never;
        /** Register a credential; the secret is vaulted on arrival and never returned */
        post: operations["createCredential"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/credentials/{credential_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a credential (never its secret) */
        get: operations["getCredential"];
        put?: never;
        post?: never;
        /** Delete a credential no repository uses */
        delete: operations["deleteCredential"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/integration": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The calling integration: its root tenant and the ids of its approver keys */
        get: operations["getIntegration"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/repositories": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the repositories of the integration registry, newest first */
        get: operations["listRepositories"];
        put?: never;
        /** Register a git repository in the integration registry */
        post: operations["createRepository"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/repositories/{repository_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a repository with its sync state and skill count */
        get: operations["getRepository"];
        put?: never;
        post?: never;
        /** Delete a repository and its skills, unless a tenant has it attached or a role pins it */
        delete: operations["deleteRepository"];
        options?: never;
        head?: never;
        /** Update a repository: name, branch, credential, metadata (a new branch or credential resets sync to pending) */
        patch: operations["updateRepository"];
        trace?: never;
    };
    "/repositories/{repository_id}/skills": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the skills of a repository, newest first */
        get: operations["listSkills"];
        put?: never;
        /** Register a manual skill in a repository (it survives re-syncs) */
        post: operations["createSkill"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/repositories/{repository_id}/sync": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Sync details: state, synced commit and what the last scan skipped (invalid manifests, conflicts) */
        get: operations["getRepositorySync"];
        put?: never;
        /** Start a fresh git read that reconciles the skill catalog */
        post: operations["syncRepository"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/roles/{role_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a role */
        get: operations["getRole"];
        put?: never;
        post?: never;
        /** Delete a role that no user holds */
        delete: operations["deleteRole"];
        options?: never;
        head?: never;
        /** Update a role: name, description, skill access, metadata (applies to conversations created afterwards) */
        patch: operations["updateRole"];
        trace?: never;
    };
    "/tenants": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the tenants under the integration root, newest first */
        get: operations["listTenants"];
        put?: never;
        /** Create a tenant */
        post: operations["createTenant"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tenants/{tenant_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a tenant */
        get: operations["getTenant"];
        put?: never;
        post?: never;
        /** Deprovision a tenant (and its users, roles and child tenants) */
        delete: operations["deleteTenant"];
        options?: never;
        head?: never;
        /** Update a tenant: name, status (suspend or reactivate), settings, metadata */
        patch: operations["updateTenant"];
        trace?: never;
    };
    "/tenants/{tenant_id}/repository": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /** Assign the tenant's skill repository */
        put: operations["attachTenantRepository"];
        post?: never;
        /** Remove the tenant's own repository assignment (it then inherits its nearest ancestor's) */
        delete: operations["detachTenantRepository"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tenants/{tenant_id}/roles": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List a tenant's roles, newest first (optionally by exact name) */
        get: operations["listRoles"];
        put?: never;
        /** Create a role in a tenant */
        post: operations["createRole"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tenants/{tenant_id}/secrets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List a tenant's own secrets by alias, A to Z (aliases and timestamps only) */
        get: operations["listTenantSecrets"];
        /** Vault tenant secrets: merge-upsert per alias (existing aliases overwritten, others untouched); values are write-only. Child tenants inherit them */
        put: operations["putTenantSecrets"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tenants/{tenant_id}/secrets/{alias}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Remove a tenant secret */
        delete: operations["deleteTenantSecret"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tenants/{tenant_id}/users": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List a tenant's users, newest first */
        get: operations["listUsers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tenants/{tenant_id}/users/by-external-id/{external_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /** Get, create or refresh a user of a tenant by its external id (never reactivates a suspended user) */
        put: operations["upsertUser"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/tenants/by-external-id/{external_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a tenant by its external id */
        get: operations["getTenantByExternalId"];
        /** Get, create or refresh a tenant by its external id */
        put: operations["upsertTenant"];
        post?: never;
        /** Deprovision a tenant (and its users, roles and child tenants) by external id */
        delete: operations["deleteTenantByExternalId"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/users/{user_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a user */
        get: operations["getUser"];
        put?: never;
        post?: never;
        /** Deprovision a user */
        delete: operations["deleteUser"];
        options?: never;
        head?: never;
        /** Update a user: profile, status (suspend or reactivate), role, storage, metadata */
        patch: operations["updateUser"];
        trace?: never;
    };
    "/users/{user_id}/roles": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the user's role (at most one), with the repository it pins */
        get: operations["listUserRoles"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/users/{user_id}/secrets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List a user's secrets by alias, A to Z (aliases and timestamps only) */
        get: operations["listUserSecrets"];
        /** Vault user secrets: merge-upsert per alias (existing aliases overwritten, others untouched); values are write-only */
        put: operations["putUserSecrets"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/users/{user_id}/secrets/{alias}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Remove a user secret */
        delete: operations["deleteUserSecret"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/webhooks/github": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Receive a GitHub delivery: a push queues the sync of every registered repository on that URL and branch */
        post: operations["receiveGitHubWebhook"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /**
         * @description `[http://]host[:port]`: a DNS name, a `*.` suffix wildcard (one or more labels), an IPv4 literal or a bracketed IPv6 literal; any port when none is given; HTTPS only unless `http://` is written.
         * @example api.example.com
         * @example *.example.org
         * @example 10.0.0.5:8443
         * @example http://[2001:db8::1]:8080
         */
        AllowedHost: string;
        Approval: {
            conversation_id: string;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            expires_at: string;
            id: string;
            /** @description The assistant message parked on this approval */
            message_id: string;
            /** @description The audit note given with the resolution */
            note: string | null;
            /** @constant */
            object: "approval";
            reason: string;
            requested_items: {
                alias?: string;
                description: string;
                /** @enum {string} */
                kind: "action" | "secret";
            }[];
            resolved_at: string | null;
            /** @description `approver_key:<approver_key_id>`; null while pending or when expired */
            resolved_by: string | null;
            /** @enum {string} */
            status: "pending" | "approved" | "denied" | "expired";
            tenant_id: string;
            /** Format: date-time */
            updated_at: string;
        };
        ApproverKeySummary: {
            /** @enum {string} */
            algorithm: "hmac-sha256" | "ed25519";
            /** Format: date-time */
            created_at: string;
            id: string;
            /** @constant */
            object: "approver_key";
            tenant_id: string;
        };
        AssignedRole: {
            /** Format: date-time */
            created_at: string;
            description: string | null;
            id: string;
            name: string;
            /** @constant */
            object: "role";
            /** @description The repository the role is pinned to (set by `selected` skill access); null means the tenant default. */
            repository_id: string | null;
            skill_access: components["schemas"]["SkillAccess"];
            tenant_id: string;
            /** Format: date-time */
            updated_at: string;
        };
        /** @description A value and the only destinations it may be sent to (the recommended form). */
        BoundSecretValue: {
            allowed_hosts: components["schemas"]["AllowedHost"][];
            value: string;
        };
        Conversation: {
            context: {
                repository_id: string | null;
                role_id: string;
                skill_ids: string[];
            };
            /** Format: date-time */
            created_at: string;
            external_id: string | null;
            filler: components["schemas"]["Filler"] | null;
            id: string;
            last_message_at: string | null;
            message_count: number;
            metadata: components["schemas"]["Metadata"];
            /** @constant */
            object: "conversation";
            runtime: {
                agent_type: string;
                expires_at: string | null;
                idle_ttl_seconds: number | null;
                /** @enum {string} */
                mode: "pooled" | "warm";
                /** @enum {string} */
                sandbox_state: "warm" | "cold";
            };
            selected_skill_ids: string[] | null;
            /** @enum {string} */
            status: "active" | "archived";
            storage: components["schemas"]["Storage"];
            tenant_id: string;
            title: string | null;
            /** Format: date-time */
            updated_at: string;
            user_id: string;
        };
        ConversationSecret: {
            alias: string;
            /** @description The destinations the value may be sent to; null: unbound (any destination) */
            allowed_hosts: components["schemas"]["AllowedHost"][] | null;
            /** Format: date-time */
            created_at: string;
            /** @constant */
            object: "conversation.secret";
            /** Format: date-time */
            updated_at: string;
        };
        CreatedApproverKey: {
            /** @enum {string} */
            algorithm: "hmac-sha256" | "ed25519";
            /** Format: date-time */
            created_at: string;
            id: string;
            /** @constant */
            object: "approver_key";
            /** @description hmac-sha256 only, shown once: base64url of the raw HMAC key */
            secret?: string;
            tenant_id: string;
        };
        CreatedIntegration: {
            /** Format: date-time */
            created_at: string;
            id: string;
            name: string;
            /** @constant */
            object: "integration";
            root_tenant_id: string;
            /** @description Shown once; only its hash is stored */
            service_key: string;
            /** @description Id of that key, to revoke it after a rotation */
            service_key_id: string;
        };
        CreatedServiceKey: {
            /** Format: date-time */
            created_at: string;
            id: string;
            integration_id: string;
            /** @constant */
            object: "service_key";
            /** @description Shown once; only its hash is stored */
            service_key: string;
        };
        /** @description A vault handle. The secret is write-only and never returned. */
        Credential: {
            /** Format: date-time */
            created_at: string;
            id: string;
            metadata: components["schemas"]["Metadata"];
            name: string;
            /** @constant */
            object: "credential";
            type: string;
            /** Format: date-time */
            updated_at: string;
        };
        Filler: {
            enabled: boolean;
        };
        FillerInput: {
            enabled: boolean;
        };
        /** @description A GitHub webhook payload (push and ping are acted on) */
        GitHubDelivery: {
            after?: string;
            deleted?: boolean;
            ref?: string;
            repository?: {
                clone_url?: string;
                git_url?: string;
                html_url?: string;
                /** @description unix seconds in push events */
                pushed_at?: number | string;
                ssh_url?: string;
            } & {
                [key: string]: unknown;
            };
        } & {
            [key: string]: unknown;
        };
        Integration: {
            /** @description Active approver keys of the subtree; never their secrets */
            approver_keys: components["schemas"]["ApproverKeySummary"][];
            /** Format: date-time */
            created_at: string;
            id: string;
            name: string;
            /** @constant */
            object: "integration";
            root_tenant_id: string;
        };
        Message: {
            content: string;
            conversation_id: string;
            /** Format: date-time */
            created_at: string;
            env: {
                [key: string]: string;
            } | null;
            id: string;
            metadata: components["schemas"]["Metadata"];
            /** @constant */
            object: "message";
            parts?: components["schemas"]["MessagePart"][];
            /** @enum {string} */
            role: "user" | "assistant" | "system";
            skill_ids: string[] | null;
            /** @enum {string} */
            status: "completed" | "in_progress" | "failed";
            usage?: components["schemas"]["Usage"];
        };
        MessagePart: {
            text?: string;
            type: string;
        } & {
            [key: string]: unknown;
        };
        /** @description String keys to string values; at most 50 keys, values at most 500 characters. */
        Metadata: {
            [key: string]: string;
        };
        /** @description RFC 9457 problem details */
        Problem: {
            conflicting_resource_id?: string;
            detail?: string;
            errors?: {
                message: string;
                pointer: string;
            }[];
            /** Format: uri-reference */
            instance?: string;
            request_id?: string;
            /** Format: int32 */
            status: number;
            title: string;
            /**
             * Format: uri-reference
             * @description {base_url}/problems/{slug}
             */
            type: string;
        };
        Repository: {
            branch: string;
            /** Format: date-time */
            created_at: string;
            credential_id: string | null;
            id: string;
            metadata: components["schemas"]["Metadata"];
            name: string;
            /** @constant */
            object: "repository";
            /** @enum {string} */
            provider: "github" | "gitlab" | "bitbucket" | "azure_devops" | "generic";
            repo_url: string;
            skill_count: number;
            sync: components["schemas"]["RepositorySync"];
            /** Format: date-time */
            updated_at: string;
        };
        RepositorySync: {
            /** @description The failure reason when state is error */
            error: string | null;
            /** @description Completion of the last successful scan */
            last_synced_at: string | null;
            /** @enum {string} */
            state: "pending" | "syncing" | "ready" | "error";
        };
        RepositorySyncDetails: {
            /** @description The commit of the last successful scan; runs materialise skills from it */
            commit: string | null;
            error: string | null;
            last_synced_at: string | null;
            /** @constant */
            object: "repository.sync";
            repository_id: string;
            /** @description When the sync in flight started (null unless syncing) */
            started_at: string | null;
            /** @enum {string} */
            state: "pending" | "syncing" | "ready" | "error";
            /** @description Invalid manifests, duplicate names and names held by manual skills, from the last successful scan */
            warnings: components["schemas"]["RepositorySyncWarning"][];
        };
        RepositorySyncWarning: {
            /** @enum {string} */
            kind: "invalid_manifest" | "duplicate_name" | "manual_conflict" | "limit";
            message: string;
            /** @description The skill name concerned, if known */
            name: string | null;
            /** @description The manifest concerned, if any */
            path: string | null;
        };
        Role: {
            /** Format: date-time */
            created_at: string;
            description: string | null;
            id: string;
            metadata: components["schemas"]["Metadata"];
            name: string;
            /** @constant */
            object: "role";
            skill_access: components["schemas"]["SkillAccess"];
            tenant_id: string;
            /** Format: date-time */
            updated_at: string;
        };
        SecretEntry: string | components["schemas"]["BoundSecretValue"];
        Skill: {
            /** Format: date-time */
            created_at: string;
            description: string | null;
            id: string;
            metadata: components["schemas"]["Metadata"];
            name: string;
            /** @constant */
            object: "skill";
            /** @description Manifest location inside the repository */
            path: string | null;
            repository_id: string;
            /** @enum {string} */
            source: "discovered" | "manual";
            /** Format: date-time */
            updated_at: string;
            version: string | null;
        };
        /** @description `all`: every skill of the tenant's effective repository; `selected`: only the listed skills of it. */
        SkillAccess: {
            /** @constant */
            mode: "all";
        } | {
            /** @constant */
            mode: "selected";
            skill_ids: string[];
        };
        /** @description `all`: every skill of the tenant's effective repository; `selected`: only the listed skills of it. */
        SkillAccessInput: {
            /** @constant */
            mode: "all";
        } | {
            /** @constant */
            mode: "selected";
            skill_ids: string[];
        };
        Storage: {
            bucket_uri: string;
            /** @enum {string} */
            provider: "platform" | "external";
        };
        /** @description NDJSON: one JSON object per line. Agent events (type system, stream_event, assistant, user, result) verbatim; platform lines {"object":"platform.event","type":...}; keepalive {"event":"ping"}. Ignore unknown lines. */
        StreamLine: {
            [key: string]: unknown;
        };
        Tenant: {
            /** Format: date-time */
            created_at: string;
            external_id: string | null;
            id: string;
            metadata: components["schemas"]["Metadata"];
            name: string | null;
            /** @constant */
            object: "tenant";
            /** @description The parent tenant; null only for an integration root. */
            parent_id: string | null;
            repository_id: string | null;
            settings: components["schemas"]["TenantSettings"];
            /** @enum {string} */
            status: "active" | "suspended";
            /** Format: date-time */
            updated_at: string;
        };
        TenantSecret: {
            alias: string;
            /** @description The destinations the value may be sent to; null: unbound (any destination) */
            allowed_hosts: components["schemas"]["AllowedHost"][] | null;
            /** Format: date-time */
            created_at: string;
            /** @constant */
            object: "tenant.secret";
            /** Format: date-time */
            updated_at: string;
        };
        TenantSettings: {
            /** @default vendor-agent-sdk */
            default_agent_type: string;
            /** @default true */
            filler_enabled: boolean;
            /**
             * @description Cap on the sandboxes the tenant keeps busy at once (runs in progress); null: the deployment default (ACIS_TENANT_MAX_BUSY_SANDBOXES)
             * @default null
             */
            max_busy_sandboxes: number | null;
            /**
             * @description Cap on the sandboxes one user of the tenant keeps busy at once; null: the deployment default (ACIS_USER_MAX_BUSY_SANDBOXES)
             * @default null
             */
            max_busy_sandboxes_per_user: number | null;
            /** @default 5 */
            max_concurrent_warm: number;
            /** @default 3600 */
            max_idle_ttl_seconds: number;
        };
        TenantSettingsInput: {
            /** @default vendor-agent-sdk */
            default_agent_type?: string;
            /** @default true */
            filler_enabled?: boolean;
            /**
             * @description Cap on the sandboxes the tenant keeps busy at once (runs in progress); null: the deployment default (ACIS_TENANT_MAX_BUSY_SANDBOXES)
             * @default null
             */
            max_busy_sandboxes?: number | null;
            /**
             * @description Cap on the sandboxes one user of the tenant keeps busy at once; null: the deployment default (ACIS_USER_MAX_BUSY_SANDBOXES)
             * @default null
             */
            max_busy_sandboxes_per_user?: number | null;
            /** @default 5 */
            max_concurrent_warm?: number;
            /** @default 3600 */
            max_idle_ttl_seconds?: number;
        };
        Token: {
            /** Format: date-time */
            expires_at: string;
            /** @constant */
            object: "token";
            tenant_id: string;
            token: string;
            /** @constant */
            token_type: "Bearer";
            user_id: string;
        };
        Usage: {
            input_tokens: number;
            output_tokens: number;
        };
        User: {
            /** Format: date-time */
            created_at: string;
            display_name: string | null;
            email: string | null;
            external_id: string;
            id: string;
            metadata: components["schemas"]["Metadata"];
            /** @constant */
            object: "user";
            role_id: string | null;
            /** @enum {string} */
            status: "active" | "suspended";
            storage: components["schemas"]["Storage"];
            tenant_id: string;
            /** Format: date-time */
            updated_at: string;
        };
        UserSecret: {
            alias: string;
            /** @description The destinations the value may be sent to; null: unbound (any destination) */
            allowed_hosts: components["schemas"]["AllowedHost"][] | null;
            /** Format: date-time */
            created_at: string;
            /** @constant */
            object: "user.secret";
            /** Format: date-time */
            updated_at: string;
        };
        /** @description What a webhook delivery did */
        WebhookReceipt: {
            delivery_id: string | null;
            detail: string;
            event: string;
            /** @constant */
            object: "webhook_delivery";
            /** @enum {string} */
            outcome: "queued" | "up_to_date" | "ignored" | "duplicate" | "pong";
            syncs_queued: number;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    adminRevokeApproverKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                approver_key_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing or wrong admin token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such active key */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    adminCreateIntegration: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "Acme host product"
                 *     }
                 */
                "application/json": {
                    name: string;
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedIntegration"];
                };
            };
            /** @description Missing or wrong admin token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    adminCreateServiceKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                integration_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedServiceKey"];
                };
            };
            /** @description Missing or wrong admin token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    adminRevokeServiceKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                service_key_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing or wrong admin token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such active key */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    adminCreateApproverKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "algorithm": "hmac-sha256"
                 *     }
                 */
                "application/json": {
                    /** @enum {string} */
                    algorithm: "hmac-sha256" | "ed25519";
                    /** @description ed25519 only: base64url of the raw 32-byte public key */
                    public_key?: string;
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedApproverKey"];
                };
            };
            /** @description Missing or wrong admin token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getApproval: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                approval_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The approval */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Approval"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such approval (or conversation) within reach */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    approveApproval: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: string;
            };
            path: {
                approval_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "signature": {
                 *         "key_id": "apk_01JD4Z8K5M2N3P4Q5R6S7T8V9W",
                 *         "algorithm": "hmac-sha256",
                 *         "exp": 1893456000,
                 *         "value": "c2lnbmF0dXJlLW9mLXRoZS1hcHByb3ZhbA"
                 *       },
                 *       "note": "Approved by the on-call lead"
                 *     }
                 */
                "application/json": {
                    note?: string;
                    /** @description Values (or `{value, allowed_hosts}`) for the requested secret items, by alias; vaulted at conversation scope; write-only */
                    secrets?: {
                        [key: string]: components["schemas"]["SecretEntry"];
                    };
                    signature: {
                        /** @description `hmac-sha256` or `ed25519`: the algorithm of that key */
                        algorithm: string;
                        /** @description Unix seconds; in the future, at most 5 minutes ahead */
                        exp: number;
                        key_id: string;
                        /** @description base64url of the MAC or signature over the canonical payload */
                        value: string;
                    };
                };
            };
        };
        responses: {
            /** @description The approval, approved */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Approval"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The signature does not verify (approval-signature-invalid), or beyond the token’s user */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such approval (or conversation) within reach */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Already resolved or past its expiry (approval-expired) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body, or a secret under an alias the approval did not request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    denyApproval: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: string;
            };
            path: {
                approval_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "signature": {
                 *         "key_id": "apk_01JD4Z8K5M2N3P4Q5R6S7T8V9W",
                 *         "algorithm": "hmac-sha256",
                 *         "exp": 1893456000,
                 *         "value": "c2lnbmF0dXJlLW9mLXRoZS1hcHByb3ZhbA"
                 *       },
                 *       "note": "Not this quarter"
                 *     }
                 */
                "application/json": {
                    note?: string;
                    /** @description Values (or `{value, allowed_hosts}`) for the requested secret items, by alias; vaulted at conversation scope; write-only */
                    secrets?: {
                        [key: string]: components["schemas"]["SecretEntry"];
                    };
                    signature: {
                        /** @description `hmac-sha256` or `ed25519`: the algorithm of that key */
                        algorithm: string;
                        /** @description Unix seconds; in the future, at most 5 minutes ahead */
                        exp: number;
                        key_id: string;
                        /** @description base64url of the MAC or signature over the canonical payload */
                        value: string;
                    };
                };
            };
        };
        responses: {
            /** @description The approval, denied */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Approval"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The signature does not verify (approval-signature-invalid), or beyond the token’s user */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such approval (or conversation) within reach */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Already resolved or past its expiry (approval-expired) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body, or a secret under an alias the approval did not request */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    exchangeToken: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "tenant_external_id": "acme-corp",
                 *       "user_external_id": "user-42",
                 *       "ttl_seconds": 900
                 *     }
                 */
                "application/json": {
                    tenant_external_id: string;
                    /** @default 900 */
                    ttl_seconds?: number;
                    user_external_id: string;
                };
            };
        };
        responses: {
            /** @description The platform token */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Token"];
                };
            };
            /** @description Missing or unknown service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Suspended tenant, deactivated user, or not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Unknown tenant or user */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listConversations: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
                tenant_id?: string;
                user_id?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Conversation"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createConversation: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "user_id": "usr_01JD4Z8K5M2N3P4Q5R6S7T8V9W",
                 *       "external_id": "ticket-1234",
                 *       "title": "Quarterly report",
                 *       "runtime": {
                 *         "mode": "warm",
                 *         "idle_ttl_seconds": 600
                 *       },
                 *       "initial_message": {
                 *         "content": "Summarise the attached report."
                 *       }
                 *     }
                 */
                "application/json": {
                    external_id?: string;
                    filler?: components["schemas"]["FillerInput"] | null;
                    /** @description When present, the response is the NDJSON stream of its run */
                    initial_message?: {
                        content: string;
                        env?: {
                            [key: string]: string;
                        };
                        filler?: components["schemas"]["FillerInput"];
                        metadata?: components["schemas"]["Metadata"];
                        /** @enum {string} */
                        on_capacity?: "reject" | "hold";
                        parts?: components["schemas"]["MessagePart"][];
                        /** @description Alias to value, or to `{value, allowed_hosts}`; write-only; scoped to this run; never echoed */
                        secrets?: {
                            [key: string]: components["schemas"]["SecretEntry"];
                        };
                        skill_ids?: string[];
                    };
                    metadata?: components["schemas"]["Metadata"];
                    /** @enum {string} */
                    on_capacity?: "reject" | "hold";
                    runtime?: {
                        agent_type?: string;
                        idle_ttl_seconds?: number;
                        /** @enum {string} */
                        mode?: "pooled" | "warm";
                    };
                    selected_skill_ids?: string[] | null;
                    title?: string | null;
                    user_id?: string;
                };
            };
        };
        responses: {
            /** @description With initial_message: the run as NDJSON, led by a conversation line */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/x-ndjson": components["schemas"]["StreamLine"];
                };
            };
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Conversation"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such user */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description external_id taken (external-id-conflict) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body, role-required, skills outside the context, TTL above the cap */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description initial_message: capacity-exhausted, with Retry-After; or rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description initial_message: shutting-down (this node takes no new messages; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getConversation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                conversation_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The conversation */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Conversation"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteConversation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                conversation_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    updateConversation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                conversation_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "title": "Quarterly report (final)",
                 *       "status": "archived"
                 *     }
                 */
                "application/json": {
                    filler?: components["schemas"]["FillerInput"] | null;
                    metadata?: components["schemas"]["Metadata"];
                    runtime?: {
                        agent_type?: string;
                        idle_ttl_seconds?: number;
                        /** @enum {string} */
                        mode?: "pooled" | "warm";
                    };
                    selected_skill_ids?: string[] | null;
                    /** @enum {string} */
                    status?: "active" | "archived";
                    title?: string | null;
                };
            };
        };
        responses: {
            /** @description The updated conversation */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Conversation"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listConversationApprovals: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
            };
            header?: never;
            path: {
                conversation_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Approval"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such approval (or conversation) within reach */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listMessages: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
            };
            header?: never;
            path: {
                conversation_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Message"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    sendMessage: {
        parameters: {
            query?: {
                stream?: "true" | "false";
            };
            header?: {
                "Idempotency-Key"?: string;
            };
            path: {
                conversation_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "content": "Post the summary to the team's channel.",
                 *       "env": {
                 *         "CHANNEL": "#reports"
                 *       },
                 *       "secrets": {
                 *         "SLACK_TOKEN": "xoxb-example"
                 *       },
                 *       "on_capacity": "hold"
                 *     }
                 */
                "application/json": {
                    content: string;
                    env?: {
                        [key: string]: string;
                    };
                    filler?: components["schemas"]["FillerInput"];
                    metadata?: components["schemas"]["Metadata"];
                    /** @enum {string} */
                    on_capacity?: "reject" | "hold";
                    parts?: components["schemas"]["MessagePart"][];
                    /** @description Alias to value, or to `{value, allowed_hosts}`; write-only; scoped to this run; never echoed */
                    secrets?: {
                        [key: string]: components["schemas"]["SecretEntry"];
                    };
                    skill_ids?: string[];
                };
            };
        };
        responses: {
            /** @description The run as NDJSON lines (stream=true) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/x-ndjson": components["schemas"]["StreamLine"];
                };
            };
            /** @description The completed assistant message (stream=false) */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Message"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description conversation-archived, or conversation-busy while a run is in flight */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body, skills outside the conversation, missing-secret (stream=false) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description capacity-exhausted, with Retry-After; or rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description shutting-down (this node takes no new messages; retry), or with stream=false sandbox-unavailable */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    reattachMessageStream: {
        parameters: {
            query?: {
                after?: number;
            };
            header?: never;
            path: {
                conversation_id: string;
                message_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The run’s lines after `after` as NDJSON (pings are not counted) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/x-ndjson": components["schemas"]["StreamLine"];
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listConversationSecrets: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
            };
            header?: never;
            path: {
                conversation_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["ConversationSecret"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or (writes) tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    putConversationSecrets: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                conversation_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "secrets": {
                 *         "SLACK_TOKEN": "xoxb-example"
                 *       }
                 *     }
                 */
                "application/json": {
                    /** @description Alias to value, or to `{value, allowed_hosts}`; merged per alias (existing aliases overwritten, others untouched); write-only */
                    secrets: {
                        [key: string]: components["schemas"]["SecretEntry"];
                    };
                };
            };
        };
        responses: {
            /** @description The conversation's secrets, all of them (aliases and timestamps only) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["ConversationSecret"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or (writes) tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The conversation is archived (conversation-archived) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteConversationSecret: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                alias: string;
                conversation_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or (writes) tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation, or no secret under this alias */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The conversation is archived (conversation-archived) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getConversationByExternalId: {
        parameters: {
            query?: {
                tenant_id?: string;
            };
            header?: never;
            path: {
                external_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The conversation */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Conversation"];
                };
            };
            /** @description tenant_id missing */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    upsertConversation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                external_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "user_id": "usr_01JD4Z8K5M2N3P4Q5R6S7T8V9W",
                 *       "title": "Quarterly report",
                 *       "metadata": {
                 *         "ticket": "1234"
                 *       }
                 *     }
                 */
                "application/json": {
                    filler?: components["schemas"]["FillerInput"] | null;
                    /** @description When present, the response is the NDJSON stream of its run */
                    initial_message?: {
                        content: string;
                        env?: {
                            [key: string]: string;
                        };
                        filler?: components["schemas"]["FillerInput"];
                        metadata?: components["schemas"]["Metadata"];
                        /** @enum {string} */
                        on_capacity?: "reject" | "hold";
                        parts?: components["schemas"]["MessagePart"][];
                        /** @description Alias to value, or to `{value, allowed_hosts}`; write-only; scoped to this run; never echoed */
                        secrets?: {
                            [key: string]: components["schemas"]["SecretEntry"];
                        };
                        skill_ids?: string[];
                    };
                    metadata?: components["schemas"]["Metadata"];
                    /** @enum {string} */
                    on_capacity?: "reject" | "hold";
                    runtime?: {
                        agent_type?: string;
                        idle_ttl_seconds?: number;
                        /** @enum {string} */
                        mode?: "pooled" | "warm";
                    };
                    selected_skill_ids?: string[] | null;
                    title?: string | null;
                    user_id?: string;
                };
            };
        };
        responses: {
            /** @description Existed; provided fields merged. With initial_message (created or not): the run as NDJSON, led by a conversation line */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Conversation"];
                };
            };
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Conversation"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such user */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description initial_message on an archived conversation (conversation-archived), or a run in flight */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body, immutable field mismatch, role-required */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description initial_message: capacity-exhausted, with Retry-After; or rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description initial_message: shutting-down (this node takes no new messages; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteConversationByExternalId: {
        parameters: {
            query?: {
                tenant_id?: string;
            };
            header?: never;
            path: {
                external_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description tenant_id missing */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing or invalid credential */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Beyond the token’s user, or tenant suspended (tenant-suspended) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such conversation */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listCredentials: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of credentials */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Credential"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createCredential: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "skills-repo-token",
                 *       "type": "git_pat",
                 *       "secret": "ghp_exampleexampleexample"
                 *     }
                 */
                "application/json": {
                    metadata?: components["schemas"]["Metadata"];
                    /** @description Unique across the integration registry */
                    name: string;
                    /** @description Encrypted on arrival; never returned, logged or echoed in errors */
                    secret: string;
                    /**
                     * @description Open enum: git_pat, git_ssh_key, api_key, basic_auth, oauth_token, generic_secret, github_app, github_webhook_secret, ...
                     * @default generic_secret
                     */
                    type?: string;
                };
            };
        };
        responses: {
            /** @description Created (without the secret) */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Credential"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Name taken (name-conflict) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getCredential: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                credential_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The credential */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Credential"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such credential in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteCredential: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                credential_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such credential in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description A repository uses it (resource-in-use) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getIntegration: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The integration self record */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Integration"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listRepositories: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of repositories */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Repository"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createRepository: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "skills",
                 *       "repo_url": "https://github.com/acme/skills.git",
                 *       "branch": "main",
                 *       "provider": "github",
                 *       "credential_id": "crd_01JD4Z8K5M2N3P4Q5R6S7T8V9W"
                 *     }
                 */
                "application/json": {
                    /** @default main */
                    branch?: string;
                    /** @description Omit (or null) for a public repository */
                    credential_id?: string | null;
                    metadata?: components["schemas"]["Metadata"];
                    /** @description Unique across the integration registry */
                    name: string;
                    /**
                     * @default generic
                     * @enum {string}
                     */
                    provider?: "github" | "gitlab" | "bitbucket" | "azure_devops" | "generic";
                    /** @description git remote: https, http, ssh or git URL, scp-like user@host:path, or file:// when the deployment allows it */
                    repo_url: string;
                };
            };
        };
        responses: {
            /** @description Registered; its first sync starts at once (state pending, then syncing) */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Repository"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Name taken (name-conflict) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body, refused URL or unknown credential */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getRepository: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                repository_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The repository */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Repository"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such repository in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteRepository: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                repository_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such repository in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Attached to a tenant or pinned by a role (resource-in-use) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    updateRepository: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                repository_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "branch": "release"
                 *     }
                 */
                "application/json": {
                    branch?: string;
                    /** @description null clears it (public repository) */
                    credential_id?: string | null;
                    metadata?: components["schemas"]["Metadata"];
                    name?: string;
                };
            };
        };
        responses: {
            /** @description The updated repository */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Repository"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such repository in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Name taken (name-conflict) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body or unknown credential */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listSkills: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
            };
            header?: never;
            path: {
                repository_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of skills */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Skill"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such repository in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createSkill: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: string;
            };
            path: {
                repository_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "release-notes",
                 *       "description": "Writes release notes from a changelog",
                 *       "path": "skills/release-notes"
                 *     }
                 */
                "application/json": {
                    description?: string | null;
                    metadata?: components["schemas"]["Metadata"];
                    /** @description Unique per repository */
                    name: string;
                    path?: string | null;
                    version?: string | null;
                };
            };
        };
        responses: {
            /** @description Created, with source manual */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Skill"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such repository in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Name taken in this repository (name-conflict) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getRepositorySync: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                repository_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The sync details */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RepositorySyncDetails"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such repository in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    syncRepository: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: string;
            };
            path: {
                repository_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Sync started; state syncing */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Repository"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such repository in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description A sync is already in flight (sync-in-progress) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                role_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The role */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Role"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such role in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                role_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such role in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description A user holds the role (resource-in-use, conflicting_resource_id names one) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    updateRole: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                role_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "skill_access": {
                 *         "mode": "all"
                 *       }
                 *     }
                 */
                "application/json": {
                    description?: string | null;
                    metadata?: components["schemas"]["Metadata"];
                    name?: string;
                    skill_access?: components["schemas"]["SkillAccessInput"];
                };
            };
        };
        responses: {
            /** @description The updated role */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Role"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such role in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Name taken in the tenant (name-conflict) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body, or selected skills outside the tenant's repository */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listTenants: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
                status?: "active" | "suspended";
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of tenants */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Tenant"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createTenant: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "Acme Corp",
                 *       "external_id": "acme-corp",
                 *       "settings": {
                 *         "filler_enabled": true,
                 *         "max_idle_ttl_seconds": 3600
                 *       },
                 *       "metadata": {
                 *         "plan": "enterprise"
                 *       }
                 *     }
                 */
                "application/json": {
                    external_id?: string;
                    metadata?: components["schemas"]["Metadata"];
                    name: string;
                    /** @description Parent tenant (default: the integration root) */
                    parent_id?: string;
                    settings?: components["schemas"]["TenantSettingsInput"];
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Tenant"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description external_id taken (external-id-conflict) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getTenant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The tenant */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Tenant"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteTenant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    updateTenant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "status": "suspended"
                 *     }
                 */
                "application/json": {
                    metadata?: components["schemas"]["Metadata"];
                    name?: string | null;
                    settings?: components["schemas"]["TenantSettingsInput"];
                    /** @enum {string} */
                    status?: "active" | "suspended";
                };
            };
        };
        responses: {
            /** @description The updated tenant */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Tenant"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    attachTenantRepository: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "repository_id": "rep_01JD4Z8K5M2N3P4Q5R6S7T8V9W"
                 *     }
                 */
                "application/json": {
                    repository_id: string;
                };
            };
        };
        responses: {
            /** @description The tenant with its repository */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Tenant"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body or unknown repository */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    detachTenantRepository: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The tenant */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Tenant"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listRoles: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                name?: string;
                starting_after?: string;
            };
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of roles */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["Role"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    createRole: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: string;
            };
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "analyst",
                 *       "description": "Reads reports",
                 *       "skill_access": {
                 *         "mode": "selected",
                 *         "skill_ids": [
                 *           "skl_01JD4Z8K5M2N3P4Q5R6S7T8V9W"
                 *         ]
                 *       }
                 *     }
                 */
                "application/json": {
                    description?: string | null;
                    metadata?: components["schemas"]["Metadata"];
                    name: string;
                    /**
                     * @default {
                     *       "mode": "all"
                     *     }
                     */
                    skill_access?: components["schemas"]["SkillAccessInput"];
                };
            };
        };
        responses: {
            /** @description Created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Role"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Name taken in the tenant (name-conflict, conflicting_resource_id names the holder) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body, or selected skills outside the tenant's repository */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listTenantSecrets: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
            };
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["TenantSecret"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    putTenantSecrets: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "secrets": {
                 *         "CRM_API_KEY": "example-key"
                 *       }
                 *     }
                 */
                "application/json": {
                    /** @description Alias to value, or to `{value, allowed_hosts}`; merged per alias (existing aliases overwritten, others untouched); write-only */
                    secrets: {
                        [key: string]: components["schemas"]["SecretEntry"];
                    };
                };
            };
        };
        responses: {
            /** @description The tenant's secrets, all of them (aliases and timestamps only) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["TenantSecret"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteTenantSecret: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                alias: string;
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant, or no secret under this alias */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listUsers: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
                status?: "active" | "suspended";
            };
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of users */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["User"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    upsertUser: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                external_id: string;
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "email": "ada@example.com",
                 *       "display_name": "Ada Lovelace",
                 *       "role_id": "rol_01JD4Z8K5M2N3P4Q5R6S7T8V9W"
                 *     }
                 */
                "application/json": {
                    display_name?: string | null;
                    email?: string | null;
                    metadata?: components["schemas"]["Metadata"];
                    role_id?: string | null;
                };
            };
        };
        responses: {
            /** @description Existed; provided fields merged */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["User"];
                };
            };
            /** @description Created, with the platform bucket attached */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["User"];
                };
            };
            /** @description Bad external id */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The role belongs to another tenant (cross-tenant) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body or unknown role */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getTenantByExternalId: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                external_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The tenant */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Tenant"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    upsertTenant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                external_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "name": "Acme Corp",
                 *       "settings": {
                 *         "max_concurrent_warm": 5
                 *       },
                 *       "metadata": {
                 *         "plan": "enterprise"
                 *       }
                 *     }
                 */
                "application/json": {
                    metadata?: components["schemas"]["Metadata"];
                    name?: string | null;
                    /** @description Only used when the tenant is created; must match afterwards */
                    parent_id?: string;
                    settings?: components["schemas"]["TenantSettingsInput"];
                };
            };
        };
        responses: {
            /** @description Existed (warm path); provided fields merged */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Tenant"];
                };
            };
            /** @description Created (cold path) */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Tenant"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteTenantByExternalId: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                external_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such tenant in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    getUser: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                user_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The user */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["User"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such user in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteUser: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                user_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such user in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    updateUser: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                user_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "display_name": "Ada L.",
                 *       "status": "active"
                 *     }
                 */
                "application/json": {
                    display_name?: string | null;
                    email?: string | null;
                    metadata?: components["schemas"]["Metadata"];
                    role_id?: string | null;
                    /** @enum {string} */
                    status?: "active" | "suspended";
                    storage?: {
                        bucket_uri: string;
                        /** @constant */
                        provider: "external";
                    } | {
                        bucket_uri?: string;
                        /** @constant */
                        provider: "platform";
                    };
                };
            };
        };
        responses: {
            /** @description The updated user */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["User"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such user in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The role belongs to another tenant (cross-tenant) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body or unknown role */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listUserRoles: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
            };
            header?: never;
            path: {
                user_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page holding the assigned role, if any */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["AssignedRole"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such user in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listUserSecrets: {
        parameters: {
            query?: {
                ending_before?: string;
                limit?: number;
                starting_after?: string;
            };
            header?: never;
            path: {
                user_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["UserSecret"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Bad query */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such user in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    putUserSecrets: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                user_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "secrets": {
                 *         "GITHUB_TOKEN": "ghp_exampleexampleexample"
                 *       }
                 *     }
                 */
                "application/json": {
                    /** @description Alias to value, or to `{value, allowed_hosts}`; merged per alias (existing aliases overwritten, others untouched); write-only */
                    secrets: {
                        [key: string]: components["schemas"]["SecretEntry"];
                    };
                };
            };
        };
        responses: {
            /** @description The user's secrets, all of them (aliases and timestamps only) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        data: components["schemas"]["UserSecret"][];
                        has_more: boolean;
                        next_cursor: string | null;
                        /** @constant */
                        object: "list";
                    };
                };
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such user in this integration */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Invalid body */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    deleteUserSecret: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                alias: string;
                user_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Missing, unknown or revoked service key */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description Not a service key */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such user, or no secret under this alias */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    receiveGitHubWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                /**
                 * @example {
                 *       "ref": "refs/heads/main",
                 *       "after": "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
                 *       "repository": {
                 *         "clone_url": "https://github.com/acme/skills.git",
                 *         "pushed_at": 1764400000
                 *       }
                 *     }
                 */
                "application/json": components["schemas"]["GitHubDelivery"];
            };
        };
        responses: {
            /** @description Verified; nothing to do (ping, another event or branch, a redelivery, already synced) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookReceipt"];
                };
            };
            /** @description Verified; syncs queued */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookReceipt"];
                };
            };
            /** @description Missing signature, or one no webhook secret verifies; nothing was done */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body is not a JSON object */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate-limited, with Retry-After */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
}
