import { z } from 'zod';
import { MAX_BUSY_SANDBOXES } from '../config.js';
import { listQuery } from '../core/pagination.js';
import { ExternalId, IdParam, ListOf, Metadata, Name, Timestamp } from '../core/schemas.js';

export const DEFAULT_AGENT_TYPE = 'vendor-agent-sdk';

const BusyCap = z.number().int().min(1).max(MAX_BUSY_SANDBOXES).nullable().default(null);

/** Tenant settings: caps and defaults. Replaced wholesale on update, so omitted fields fall back to defaults. */
export const TenantSettings = z
  .object({
    filler_enabled: z.boolean().default(true),
    default_agent_type: z.string().trim().min(1).max(64).default(DEFAULT_AGENT_TYPE),
    max_idle_ttl_seconds: z.number().int().min(60).max(86400).default(3600),
    max_concurrent_warm: z.number().int().min(0).max(1000).default(5),
    max_busy_sandboxes: BusyCap.describe(
      'Cap on the sandboxes the tenant keeps busy at once (runs in progress); null: the deployment default (ACIS_TENANT_MAX_BUSY_SANDBOXES)',
    ),
    max_busy_sandboxes_per_user: BusyCap.describe(
      'Cap on the sandboxes one user of the tenant keeps busy at once; null: the deployment default (ACIS_USER_MAX_BUSY_SANDBOXES)',
    ),
  })
  .meta({ id: 'TenantSettings' });

export const TenantStatus = z.enum(['active', 'suspended']);

export const Tenant = z
  .object({
    object: z.literal('tenant'),
    id: z.string(),
    external_id: z.string().nullable(),
    name: z.string().nullable(),
    status: TenantStatus,
    parent_id: z.string().nullable().describe('The parent tenant; null only for an integration root.'),
    repository_id: z.string().nullable(),
    settings: TenantSettings,
    metadata: Metadata,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Tenant' });

export const TenantList = ListOf(Tenant);

const ParentId = z.string().max(100).describe('Parent tenant (default: the integration root)');

export const CreateTenantBody = z.object({
  name: Name,
  external_id: ExternalId.optional(),
  parent_id: ParentId.optional(),
  settings: TenantSettings.optional(),
  metadata: Metadata.optional(),
});

export const UpsertTenantBody = z.object({
  name: Name.nullable().optional(),
  parent_id: ParentId.optional().describe('Only used when the tenant is created; must match afterwards'),
  settings: TenantSettings.optional(),
  metadata: Metadata.optional(),
});

export const PatchTenantBody = z.object({
  name: Name.nullable().optional(),
  status: TenantStatus.optional(),
  settings: TenantSettings.optional(),
  metadata: Metadata.optional(),
});

export const AttachRepositoryBody = z.object({
  repository_id: z.string().min(1).max(100),
});

export const ListTenantsQuery = listQuery('tenant', { status: TenantStatus.optional() });

export const TenantIdParams = z.object({ tenant_id: IdParam });
export const TenantExternalIdParams = z.object({ external_id: ExternalId });
