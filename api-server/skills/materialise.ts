/**
 * A run's skills, delivered to its agent: the effective set (the conversation's snapshot, narrowed by
 * `selected_skill_ids`, then by the message's `skill_ids`) is read from the skill content every node
 * shares (repositories/skill-content.ts) and handed to the runner over its connection
 * (`Runner.deliverSkills`), which writes it into its workspace as `.claude/skills/<name>/`, where the
 * Agent SDK loads project skills. The folder is replaced on every run, so nothing outside this run's
 * set is on disk, and the runner offers exactly these names (the SDK hides every other skill, its
 * bundled ones included).
 *
 * A skill is delivered when its manifest is in its repository's synced commit: the directory holding
 * its SKILL.md. A skill without content there (a manual skill without a `path`, or whose path names no
 * manifest of that commit) is not offered. Each repository's files are read in one statement, so a
 * run sees one commit even while a re-sync lands.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import type { WireSkill } from '../../runner/protocol.js';
import type { Db } from '../core/db/database.js';
import type { ScopedConversationRow } from '../conversations/conversations.repository.js';
import { MANIFEST } from '../repositories/catalog.js';
import { loadSkillFiles, type SkillFile, skillDirOfManifest } from '../repositories/skill-content.js';
import { findSkillsByIds } from './skills.repository.js';

export interface MaterialiseDeps {
  db: Db;
  logger: Logger;
}

/** One skill as a run receives it: its name and its directory's files (paths relative to it). */
export interface RunSkill {
  name: string;
  files: Array<Pick<SkillFile, 'path' | 'data' | 'executable'>>;
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

/** The given skills with their content, sorted by name; skills without synced content are left out (and logged). */
export async function loadRunSkills(deps: MaterialiseDeps, skillIds: string[]): Promise<RunSkill[]> {
  const skills = await findSkillsByIds(deps.db, skillIds);
  const wanted = new Map<string, Array<{ name: string; id: string; dir: string }>>();
  for (const skill of skills) {
    const dir = skill.path === null ? undefined : skillDirOfPath(skill.path);
    if (dir === undefined) {
      deps.logger.info({ skill_id: skill.id, repository_id: skill.repository_id }, 'skill has no synced content; not offered to the agent');
      continue;
    }
    wanted.set(skill.repository_id, [...(wanted.get(skill.repository_id) ?? []), { name: skill.name, id: skill.id, dir }]);
  }
  const delivered: RunSkill[] = [];
  for (const [repositoryId, entries] of wanted) {
    const files = await loadSkillFiles(deps.db, repositoryId, [...new Set(entries.map((entry) => entry.dir))]);
    for (const entry of entries) {
      const own = files.filter((file) => file.skillDir === entry.dir);
      if (!own.some((file) => file.path === MANIFEST)) {
        deps.logger.info({ skill_id: entry.id, repository_id: repositoryId }, 'skill has no synced content; not offered to the agent');
        continue;
      }
      delivered.push({ name: entry.name, files: own.map(({ path, data, executable }) => ({ path, data, executable })) });
    }
  }
  return delivered.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The skills as they cross the runner's channel (file contents base64). */
export function wireSkills(skills: RunSkill[]): WireSkill[] {
  return skills.map((skill) => ({
    name: skill.name,
    files: skill.files.map((file) => ({ path: file.path, data: file.data.toString('base64'), executable: file.executable })),
  }));
}

/**
 * The skill directory a skill's `path` names: that of the manifest it names, or the path itself when
 * it names a directory (manual skills may say either). undefined for a path that leaves the repository.
 */
function skillDirOfPath(skillPath: string): string | undefined {
  const normalised = path.posix.normalize(skillPath.replace(/\/+$/, ''));
  if (normalised.startsWith('..') || path.posix.isAbsolute(normalised)) return undefined;
  if (path.posix.basename(normalised) === MANIFEST) return skillDirOfManifest(normalised);
  return normalised === '.' ? '' : normalised;
}
