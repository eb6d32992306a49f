import { z } from 'zod';
import { listQuery } from '../core/pagination.js';
import { BucketUri, ExternalId, IdParam, ListOf, MAX_NAME_LENGTH, Metadata, Storage, Timestamp } from '../core/schemas.js';

export const UserStatus = z.enum(['active', 'suspended']);

export const User = z
  .object({
    object: z.literal('user'),
    id: z.string(),
    tenant_id: z.string(),
    external_id: z.string(),
    email: z.string().nullable(),
    display_name: z.string().nullable(),
    status: UserStatus,
    role_id: z.string().nullable(),
    storage: Storage,
    metadata: Metadata,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'User' });

export const UserList = ListOf(User);

const Email = z.email().max(320);
const DisplayName = z.string().trim().max(MAX_NAME_LENGTH);
const RoleId = z
  .string()
  .regex(/^rol_[A-Za-z0-9]{1,64}$/, 'must be a role id (rol_...)')
  .describe('A role of the same tenant; null clears the assignment');

/**
 * `external` links a host-owned bucket; `platform` restores the auto-attached bucket, whose URI is
 * fixed by the deployment (so `bucket_uri` may be omitted, and may only repeat that URI).
 */
const StorageInput = z.discriminatedUnion('provider', [
  z.object({ provider: z.literal('external'), bucket_uri: BucketUri }),
  z.object({ provider: z.literal('platform'), bucket_uri: z.string().max(1024).optional() }),
]);

/** Status is deliberately absent: an upsert never reactivates a suspended user. */
export const UpsertUserBody = z.object({
  email: Email.nullable().optional(),
  display_name: DisplayName.nullable().optional(),
  role_id: RoleId.nullable().optional(),
  metadata: Metadata.optional(),
});

export const PatchUserBody = z.object({
  email: Email.nullable().optional(),
  display_name: DisplayName.nullable().optional(),
  status: UserStatus.optional(),
  role_id: RoleId.nullable().optional(),
  storage: StorageInput.optional(),
  metadata: Metadata.optional(),
});

export const ListUsersQuery = listQuery('user', { status: UserStatus.optional() });
export const UserRolesQuery = listQuery('role', {});

export const UserIdParams = z.object({ user_id: IdParam });
export const TenantUserExternalIdParams = z.object({ tenant_id: IdParam, external_id: ExternalId });
