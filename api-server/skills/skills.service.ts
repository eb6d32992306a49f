import type { z } from 'zod';
import { isForeignKeyViolation, json } from '../core/db/database.js';
import type { AppDeps } from '../deps.js';
import { type PageRequest, paginate } from '../core/pagination.js';
import type { ServicePrincipal } from '../core/principal.js';
import { problems } from '../core/problems.js';
import { findRepository } from '../repositories/repositories.repository.js';
import { findSkillByName, insertSkillIfAbsent, type SkillRow, selectSkills } from './skills.repository.js';
import type { CreateSkillBody, Skill } from './skills.schemas.js';

export function presentSkill(row: SkillRow): z.output<typeof Skill> {
  return {
    object: 'skill',
    id: row.id,
    repository_id: row.repository_id,
    name: row.name,
    description: row.description,
    version: row.version,
    path: row.path,
    source: row.source,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

async function repositoryIdInScope(deps: AppDeps, principal: ServicePrincipal, repositoryId: string): Promise<string> {
  const repository = await findRepository(deps.db, principal.integrationId, repositoryId);
  if (!repository) throw problems.notFound('repository');
  return repository.id;
}

/** A manual skill: it survives re-syncs, which only prune discovered ones. */
export async function createManualSkill(
  deps: AppDeps,
  principal: ServicePrincipal,
  repositoryId: string,
  body: z.output<typeof CreateSkillBody>,
): Promise<SkillRow> {
  const repository = await repositoryIdInScope(deps, principal, repositoryId);
  const now = deps.now();
  const row = {
    id: deps.newId('skill'),
    repository_id: repository,
    name: body.name,
    description: body.description ?? null,
    version: body.version ?? null,
    path: body.path ?? null,
    source: 'manual' as const,
    metadata: json(body.metadata ?? {}),
    created_at: now,
    updated_at: now,
  };
  // The loop only repeats if the name's holder was pruned between our insert and our read.
  for (;;) {
    let created: SkillRow | undefined;
    try {
      created = await insertSkillIfAbsent(deps.db, row);
    } catch (error) {
      // The repository was deleted between the check and the insert.
      if (isForeignKeyViolation(error)) throw problems.notFound('repository');
      throw error;
    }
    if (created) return created;
    const holder = await findSkillByName(deps.db, repository, body.name);
    if (holder) throw problems.nameConflict(holder.id, 'A skill with this name exists in the repository.');
  }
}

export async function listSkills(deps: AppDeps, principal: ServicePrincipal, repositoryId: string, query: PageRequest) {
  const repository = await repositoryIdInScope(deps, principal, repositoryId);
  return paginate(selectSkills(deps.db, repository), 'id', query);
}
