/**
 * How a sync Job hands its attempt's result to the API server (sync-report-server.ts), which alone
 * holds the database: the path, the token, and the one schema of the body both sides use.
 *
 * The token authenticates one attempt: HMAC-SHA256 of (repository id, claim) under a key derived from
 * the master key, so every API node checks it and nothing of it is stored; it is worth nothing once
 * that claim has ended (a newer attempt, a PATCH, a takeover) and nothing for any other repository.
 *
 * The body comes from a pod that ran git against a host a tenant chose: it is checked as hostile
 * input. Sizes are bounded as a sync in process bounds them (skill-content.ts, catalog.ts); paths
 * are relative, `/`-separated and never climb out; every file belongs to a manifest's directory.
 */
import { createHmac } from 'node:crypto';
import path from 'node:path';
import { z } from 'zod';
import { SkillName } from '../core/schemas.js';
import { MAX_SKILL_DESCRIPTION_LENGTH, MAX_SKILL_PATH_LENGTH, MAX_SKILL_VERSION_LENGTH } from '../skills/skills.schemas.js';
import { MANIFEST, MAX_MANIFESTS } from './catalog.js';
import type { AttemptResult } from './sync-attempt.js';
import { MAX_SKILL_CONTENT_BYTES, MAX_SKILL_FILES, type SkillFile, skillDirOfManifest } from './skill-content.js';

/** The purpose the token key is derived from the master key under (Vault.deriveKey). */
export const SYNC_REPORT_KEY_PURPOSE = 'sync-report-token';
const MAX_ERROR_LENGTH = 2048;
const MAX_WARNINGS = MAX_MANIFESTS + 8;
/** Base64 of the content's limit, plus room for 20 000 files' paths and the catalog. */
export const MAX_REPORT_BYTES = Math.ceil(MAX_SKILL_CONTENT_BYTES / 3) * 4 + 32 * 1024 * 1024;

/** The one path the listener serves: `/internal/repository-syncs/{repository_id}/claims/{claim}/result`. */
export const REPORT_PATH = /^\/internal\/repository-syncs\/(rep_[A-Za-z0-9]{1,58})\/claims\/([0-9a-f]{8,64})\/result$/;

export function reportPath(repositoryId: string, claim: string): string {
  return `/internal/repository-syncs/${repositoryId}/claims/${claim}/result`;
}

/** The token of one attempt (base64url), given the key derived for SYNC_REPORT_KEY_PURPOSE. */
export function syncReportToken(key: Buffer, repositoryId: string, claim: string): string {
  return createHmac('sha256', key).update(`${repositoryId}\n${claim}`).digest('base64url');
}

/** A repository-relative path: no leading `/`, no `.`/`..`/empty segment, no NUL. */
const RelativePath = z
  .string()
  .min(1)
  .max(MAX_SKILL_PATH_LENGTH * 4)
  .refine((p) => !p.includes('\0') && p.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..'), {
    message: 'must be a relative path without empty, "." or ".." segments',
  });
const ManifestPath = RelativePath.refine((p) => path.posix.basename(p) === MANIFEST, { message: `must name a ${MANIFEST}` });

const Warning = z
  .object({
    kind: z.enum(['invalid_manifest', 'duplicate_name', 'limit']),
    path: ManifestPath.nullable(),
    name: z.string().max(256).nullable(),
    message: z.string().max(MAX_ERROR_LENGTH),
  })
  .strict();

const Skill = z
  .object({
    name: SkillName,
    description: z.string().min(1).max(MAX_SKILL_DESCRIPTION_LENGTH),
    version: z.string().min(1).max(MAX_SKILL_VERSION_LENGTH).nullable(),
    path: ManifestPath.pipe(z.string().max(MAX_SKILL_PATH_LENGTH)),
  })
  .strict();

const File = z
  .object({
    skill_dir: z.union([z.literal(''), RelativePath]),
    path: RelativePath.refine((p) => p.split('/')[0] !== '.git', { message: 'may not be inside .git' }),
    /** The bytes, base64. */
    data: z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64'),
    executable: z.boolean(),
  })
  .strict();

type ReportedWarning = z.infer<typeof Warning>;

export const SyncReportSchema = z.discriminatedUnion('state', [
  z
    .object({
      state: z.literal('fetched'),
      commit: z.string().regex(/^([0-9a-f]{40}|[0-9a-f]{64})$/, 'must be a full SHA-1 or SHA-256 commit id'),
      skills: z.array(Skill).max(MAX_MANIFESTS),
      manifests: z.array(ManifestPath).max(MAX_MANIFESTS),
      warnings: z.array(Warning).max(MAX_WARNINGS),
      files: z.array(File).max(MAX_SKILL_FILES),
      // The SSH server's host keys the Job saw, for a repository with none pinned yet.
      known_hosts: z
        .string()
        .min(1)
        .max(64 * 1024)
        .optional(),
    })
    .strict()
    .superRefine((report, ctx) => {
      const manifests = new Set(report.manifests);
      const dirs = new Set(report.manifests.map(skillDirOfManifest));
      report.skills.forEach((skill, i) => {
        if (!manifests.has(skill.path))
          ctx.addIssue({ code: 'custom', path: ['skills', i, 'path'], message: 'is not among the manifests' });
      });
      if (new Set(report.skills.map((s) => s.name)).size !== report.skills.length)
        ctx.addIssue({ code: 'custom', path: ['skills'], message: 'names a skill twice' });
      const seen = new Set<string>();
      report.files.forEach((file, i) => {
        if (!dirs.has(file.skill_dir))
          ctx.addIssue({ code: 'custom', path: ['files', i, 'skill_dir'], message: "is not a manifest's directory" });
        const key = `${file.skill_dir}\0${file.path}`;
        if (seen.has(key)) ctx.addIssue({ code: 'custom', path: ['files', i, 'path'], message: 'is listed twice' });
        seen.add(key);
      });
      const bytes = report.files.reduce((sum, file) => sum + Math.floor((file.data.length * 3) / 4), 0);
      if (bytes > MAX_SKILL_CONTENT_BYTES)
        ctx.addIssue({ code: 'custom', path: ['files'], message: `hold more than ${MAX_SKILL_CONTENT_BYTES / 1024 / 1024} MiB` });
    }),
  z.object({ state: z.literal('error'), error: z.string().min(1).max(MAX_ERROR_LENGTH) }).strict(),
]);
export type SyncReport = z.infer<typeof SyncReportSchema>;

/** What the Job sends for its attempt's result. */
export function encodeReport(result: AttemptResult): SyncReport {
  if (result.state === 'error') return { state: 'error', error: result.error.slice(0, MAX_ERROR_LENGTH) };
  return {
    state: 'fetched',
    commit: result.commit,
    skills: result.catalog.skills,
    manifests: result.catalog.manifests,
    // A manual conflict is the API server's finding (when it stores the result), never a scan's.
    warnings: result.catalog.warnings.filter((w): w is ReportedWarning => w.kind !== 'manual_conflict'),
    files: result.files.map((file) => ({
      skill_dir: file.skillDir,
      path: file.path,
      data: file.data.toString('base64'),
      executable: file.executable,
    })),
    ...(result.knownHosts && { known_hosts: result.knownHosts }),
  };
}

/** The attempt's result, as the API server stores it (a validated report). */
export function decodeReport(report: SyncReport): AttemptResult {
  if (report.state === 'error') return report;
  const files: SkillFile[] = report.files.map((file) => ({
    skillDir: file.skill_dir,
    path: file.path,
    data: Buffer.from(file.data, 'base64'),
    executable: file.executable,
  }));
  return {
    state: 'fetched',
    commit: report.commit,
    catalog: { skills: report.skills, manifests: report.manifests, warnings: report.warnings },
    files,
    knownHosts: report.known_hosts,
  };
}
