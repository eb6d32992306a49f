/**
 * A run's skills, delivered to its agent: the effective set (the conversation's snapshot, narrowed by
 * `selected_skill_ids`, then by the message's `skill_ids`) is copied from the synced content into the
 * runner workspace as `.claude/skills/<name>/`, where the Agent SDK loads project skills. The folder is
 * replaced on every run, so nothing outside this run's set is on disk, and the runner offers exactly
 * these names (the SDK hides every other skill, its bundled ones included).
 *
 * A skill is delivered when its manifest is in the content of its repository's synced commit: the
 * directory holding its SKILL.md is copied. A skill without content there (a manual skill without a
 * `path`, or whose path names no manifest in the checkout) is not offered.
 */
import { existsSync } from 'node:fs';
import { cp, mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Db } from '../core/db/database.js';
import type { ScopedConversationRow } from '../conversations/conversations.repository.js';
import { MANIFEST } from '../repositories/catalog.js';
import { findRepositoryById } from '../repositories/repositories.repository.js';
import type { RepositorySyncWorker } from '../repositories/sync.js';
import { findSkillsByIds } from './skills.repository.js';

export interface MaterialiseDeps {
  db: Db;
  logger: Logger;
  repositorySync: Pick<RepositorySyncWorker, 'contentOf'>;
}

/** The skills a run of this message may use, in snapshot order. */
export function effectiveSkillIds(
  conversation: Pick<ScopedConversationRow, 'context' | 'selected_skill_ids'>,
  messageSkillIds: string[] | null | undefined,
): string[] {
  let ids = conversation.context.skill_ids;
  if (conversation.selected_skill_ids) {
    const selected = new Set(conversation.selected_skill_ids);
    ids = ids.filter((id) => selected.has(id));
  }
  if (messageSkillIds) {
    const narrowed = new Set(messageSkillIds);
    ids = ids.filter((id) => narrowed.has(id));
  }
  return ids;
}

/** Replaces `<workspace>/.claude/skills` with the given skills' directories; answers the names delivered, sorted. */
export async function materialiseSkills(deps: MaterialiseDeps, workspace: string, skillIds: string[]): Promise<string[]> {
  const target = path.join(workspace, '.claude', 'skills');
  await rm(target, { recursive: true, force: true });
  const skills = await findSkillsByIds(deps.db, skillIds);
  const delivered: string[] = [];
  const contentByRepository = new Map<string, string | undefined>();
  for (const skill of skills) {
    if (!skill.path) continue;
    if (!contentByRepository.has(skill.repository_id)) {
      const repository = await findRepositoryById(deps.db, skill.repository_id);
      contentByRepository.set(skill.repository_id, repository ? await deps.repositorySync.contentOf(repository) : undefined);
    }
    const content = contentByRepository.get(skill.repository_id);
    const source = content && skillDirectory(content, skill.path);
    if (!source) {
      deps.logger.info({ skill_id: skill.id, repository_id: skill.repository_id }, 'skill has no synced content; not offered to the agent');
      continue;
    }
    await mkdir(target, { recursive: true });
    await cp(source, path.join(target, skill.name), {
      recursive: true,
      filter: (source) => path.basename(source) !== '.git',
    });
    delivered.push(skill.name);
  }
  return delivered.sort();
}

/**
 * The directory of a skill in a checkout: that of the manifest `path` names, or `path` itself when it
 * names a directory holding a SKILL.md (manual skills may say either). Paths come from the catalog or
 * a validated body; the check keeps the copy inside the checkout regardless.
 */
function skillDirectory(content: string, skillPath: string): string | undefined {
  const resolved = path.resolve(content, skillPath);
  if (path.relative(content, resolved).startsWith('..') || !existsSync(resolved)) return undefined;
  if (existsSync(path.join(resolved, MANIFEST))) return resolved;
  return path.basename(resolved) === MANIFEST ? path.dirname(resolved) : undefined;
}
