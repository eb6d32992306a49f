/**
 * The skill catalog of a checkout: every `SKILL.md` is a skill whose YAML front matter names it
 * (`name`, the slug), says what it does (`description`) and optionally versions it (`version`); its
 * `path` is the manifest's path in the repository, and its directory is what a run receives.
 * A manifest that cannot be read as such is skipped and reported, never a failed sync.
 */
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'yaml';
import type { SyncWarning } from '../core/db/schema.js';
import { SkillName } from '../core/schemas.js';
import { MAX_SKILL_DESCRIPTION_LENGTH, MAX_SKILL_PATH_LENGTH, MAX_SKILL_VERSION_LENGTH } from '../skills/skills.schemas.js';

export const MANIFEST = 'SKILL.md';
/** Bounds on what one scan reads, so a huge or hostile repository cannot stall the worker. */
export const MAX_MANIFESTS = 1000;
const MAX_MANIFEST_BYTES = 256 * 1024;
const MAX_DIRECTORIES = 20_000;

export interface DiscoveredSkill {
  name: string;
  description: string;
  version: string | null;
  /** The manifest's path inside the repository, `/`-separated. */
  path: string;
}

export interface Catalog {
  skills: DiscoveredSkill[];
  /** Every manifest read, valid or not (a manual skill may name any of them): their directories are the content a sync stores. */
  manifests: string[];
  warnings: SyncWarning[];
}

/** Scans a checkout; manifests in path order, the first of a name wins. */
export async function scanCatalog(root: string): Promise<Catalog> {
  const manifests = await findManifests(root);
  const skills: DiscoveredSkill[] = [];
  const warnings: SyncWarning[] = [];
  const seen = new Map<string, string>();
  const read = manifests.found.slice(0, MAX_MANIFESTS);
  for (const manifestPath of read) {
    const parsed = await readManifest(root, manifestPath);
    if ('problem' in parsed) {
      warnings.push({ kind: 'invalid_manifest', path: manifestPath, name: null, message: parsed.problem });
      continue;
    }
    const holder = seen.get(parsed.name);
    if (holder) {
      warnings.push({
        kind: 'duplicate_name',
        path: manifestPath,
        name: parsed.name,
        message: `the name is already used by ${holder}; skipped`,
      });
      continue;
    }
    seen.set(parsed.name, manifestPath);
    skills.push(parsed);
  }
  if (manifests.found.length > MAX_MANIFESTS) {
    warnings.push({ kind: 'limit', path: null, name: null, message: `only the first ${MAX_MANIFESTS} manifests were read` });
  }
  if (manifests.truncated) {
    warnings.push({ kind: 'limit', path: null, name: null, message: `only the first ${MAX_DIRECTORIES} directories were scanned` });
  }
  return { skills, manifests: read, warnings };
}

/** Parses one manifest's text; `path` is only used to describe it. */
export function parseManifest(text: string, manifestPath: string): DiscoveredSkill | { problem: string } {
  const match = /^\uFEFF?---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/.exec(text);
  if (!match) return { problem: 'no YAML front matter (the file must start with a --- block)' };
  let front: unknown;
  try {
    // The failsafe schema reads every scalar as a string: `version: 1.10` stays "1.10".
    front = parse(match[1] ?? '', { schema: 'failsafe', maxAliasCount: 10 });
  } catch (error) {
    return { problem: `front matter is not valid YAML: ${(error as Error).message.split('\n')[0]}` };
  }
  if (!front || typeof front !== 'object' || Array.isArray(front)) return { problem: 'front matter is not a YAML mapping' };
  const fields = front as Record<string, unknown>;
  const name = typeof fields.name === 'string' ? fields.name.trim() : undefined;
  if (!name) return { problem: 'front matter has no name' };
  if (!SkillName.safeParse(name).success)
    return { problem: `name "${name.slice(0, 140)}" must match ^[a-z0-9][a-z0-9-]*$ (at most 128 characters)` };
  const description = typeof fields.description === 'string' ? fields.description.trim() : undefined;
  if (!description) return { problem: 'front matter has no description' };
  if (description.length > MAX_SKILL_DESCRIPTION_LENGTH)
    return { problem: `description is longer than ${MAX_SKILL_DESCRIPTION_LENGTH} characters` };
  let version: string | null = null;
  if (fields.version !== undefined && fields.version !== '') {
    if (typeof fields.version !== 'string') return { problem: 'version must be a string' };
    version = fields.version.trim();
    if (version.length > MAX_SKILL_VERSION_LENGTH) return { problem: `version is longer than ${MAX_SKILL_VERSION_LENGTH} characters` };
  }
  if (manifestPath.length > MAX_SKILL_PATH_LENGTH) return { problem: `path is longer than ${MAX_SKILL_PATH_LENGTH} characters` };
  return { name, description, version, path: manifestPath };
}

async function readManifest(root: string, manifestPath: string): Promise<DiscoveredSkill | { problem: string }> {
  const file = path.join(root, manifestPath);
  const stat = await lstat(file);
  if (!stat.isFile()) return { problem: 'not a regular file' };
  if (stat.size > MAX_MANIFEST_BYTES) return { problem: `larger than ${MAX_MANIFEST_BYTES} bytes` };
  return parseManifest(await readFile(file, 'utf8'), manifestPath);
}

/** Paths of every SKILL.md under root (relative, `/`-separated, sorted), skipping `.git`. */
async function findManifests(root: string): Promise<{ found: string[]; truncated: boolean }> {
  const found: string[] = [];
  const queue = [''];
  let visited = 0;
  while (queue.length > 0) {
    if (++visited > MAX_DIRECTORIES) return { found: found.sort(), truncated: true };
    const relative = queue.shift()!;
    const entries = await readdir(path.join(root, relative), { withFileTypes: true });
    for (const entry of entries) {
      const child = relative ? `${relative}/${entry.name}` : entry.name;
      if (entry.isDirectory() && entry.name !== '.git') queue.push(child);
      else if (entry.isFile() && entry.name === MANIFEST) found.push(child);
    }
  }
  return { found: found.sort(), truncated: false };
}
