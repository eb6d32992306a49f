import { z } from 'zod';
import { listQuery } from '../core/pagination.js';
import { IdParam, ListOf, Metadata, SkillName, Timestamp } from '../core/schemas.js';

// The spec fixes no limits for these; they bound storage and what a runner's workspace receives.
export const MAX_SKILL_DESCRIPTION_LENGTH = 4096;
export const MAX_SKILL_VERSION_LENGTH = 255;
export const MAX_SKILL_PATH_LENGTH = 1024;

export const Skill = z
  .object({
    object: z.literal('skill'),
    id: z.string(),
    repository_id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    version: z.string().nullable(),
    path: z.string().nullable().describe('Manifest location inside the repository'),
    source: z.enum(['discovered', 'manual']),
    metadata: Metadata,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Skill' });

export const SkillList = ListOf(Skill);

/** A relative path that stays inside the repository: no absolute paths, no `..`, no backslashes. */
function isPathInsideRepository(path: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: a path holding a control character is refused
  if (path.startsWith('/') || path.includes('\\') || /[\u0000-\u001f\u007f]/.test(path)) return false;
  return path.split('/').every((segment) => segment !== '..');
}

export const CreateSkillBody = z.object({
  name: SkillName.describe('Unique per repository'),
  description: z.string().max(MAX_SKILL_DESCRIPTION_LENGTH).nullable().optional(),
  version: z.string().trim().min(1).max(MAX_SKILL_VERSION_LENGTH).nullable().optional(),
  path: z
    .string()
    .trim()
    .min(1)
    .max(MAX_SKILL_PATH_LENGTH)
    .refine(isPathInsideRepository, { message: 'must be a relative path inside the repository' })
    .nullable()
    .optional(),
  metadata: Metadata.optional(),
});

export const ListSkillsQuery = listQuery('skill', {});

export const RepositorySkillsParams = z.object({ repository_id: IdParam });
