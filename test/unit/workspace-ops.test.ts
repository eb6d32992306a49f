/** What the runner does to its workspace for the API server: the skills folder replaced, writes kept inside it, archives round-tripped. */
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exportWorkspace, importWorkspace, writeSkills } from '../../runner/workspace-ops.js';

const b64 = (text: string) => Buffer.from(text).toString('base64');
let cwd: string;
beforeEach(async () => {
  cwd = await mkdtemp(path.join(tmpdir(), 'acis-workspace-ops-'));
});
afterEach(async () => {
  await rm(cwd, { recursive: true, force: true });
});

describe('writeSkills(cwd, skills)', () => {
  it('replaces .claude/skills, keeps the executable bit, and writes nothing outside a skill folder', async () => {
    await writeSkills(cwd, [{ name: 'old', files: [{ path: 'SKILL.md', data: b64('old'), executable: false }] }]);
    await writeSkills(cwd, [
      {
        name: 'heron',
        files: [
          { path: 'SKILL.md', data: b64('heron'), executable: false },
          { path: 'bin/run.sh', data: b64('#!/bin/sh\n'), executable: true },
          { path: '../../escape.txt', data: b64('no'), executable: false },
        ],
      },
    ]);
    const skills = path.join(cwd, '.claude', 'skills');
    expect(await readdir(skills)).toEqual(['heron']);
    expect(await readFile(path.join(skills, 'heron', 'SKILL.md'), 'utf8')).toBe('heron');
    expect((await stat(path.join(skills, 'heron', 'bin', 'run.sh'))).mode & 0o111).not.toBe(0);
    expect(await readdir(path.join(cwd, '.claude'))).toEqual(['skills']);
  });

  it.each(['..', '../outside', '', 'a/../..'])('refuses the skill name %j', async (name) => {
    await expect(writeSkills(cwd, [{ name, files: [] }])).rejects.toThrow('is not a folder name');
  });
});

describe('exportWorkspace and importWorkspace', () => {
  it('round-trips a workspace minus its exclusions, and fails past the size cap', async () => {
    await writeFile(path.join(cwd, 'keep.txt'), 'kept');
    await writeSkills(cwd, [{ name: 'x', files: [{ path: 'SKILL.md', data: b64('x'), executable: false }] }]);
    const pieces: Buffer[] = [];
    const bytes = await exportWorkspace(cwd, { maxBytes: 1024 * 1024, exclude: ['.claude'] }, (piece) => pieces.push(piece));
    const archive = Buffer.concat(pieces);
    expect(archive.length).toBe(bytes);
    await expect(exportWorkspace(cwd, { maxBytes: 8 }, () => undefined)).rejects.toThrow('the workspace archive exceeds 8 bytes');

    const target = await mkdtemp(path.join(tmpdir(), 'acis-workspace-ops-target-'));
    try {
      const unpacking = importWorkspace(target);
      // Fed in odd-sized pieces, as they cross the channel.
      for (let at = 0; at < archive.length; at += 7) unpacking.write(archive.subarray(at, at + 7));
      await unpacking.end();
      expect(await readdir(target)).toEqual(['keep.txt']);
      expect(await readFile(path.join(target, 'keep.txt'), 'utf8')).toBe('kept');
    } finally {
      await rm(target, { recursive: true, force: true });
    }
  });
});
