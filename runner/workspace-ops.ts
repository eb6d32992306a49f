/**
 * What the runner does to its workspace (the agent's cwd) on the server's behalf, since the two share
 * no disk: replace the skills folder, and pack or unpack the workspace as a gzipped tar (the system's
 * `tar`, present wherever the runner runs: the host for the local provider, the runner image).
 *
 * Paths come from the server, which read them from a synced checkout; every write is still kept
 * inside its folder. An unpacked archive is the conversation's own earlier workspace, unpacked inside
 * the sandbox, so it can reach nothing the agent could not.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { WireSkill } from './protocol.js';

/** Replaces `<cwd>/.claude/skills` with the given skills. */
export async function writeSkills(cwd: string, skills: WireSkill[]): Promise<void> {
  const target = path.join(cwd, '.claude', 'skills');
  await rm(target, { recursive: true, force: true });
  for (const skill of skills) {
    const dir = path.join(target, skill.name);
    if (!isInside(target, dir)) throw new Error(`skill name ${JSON.stringify(skill.name)} is not a folder name`);
    await mkdir(dir, { recursive: true });
    for (const file of skill.files) {
      const destination = path.resolve(dir, file.path);
      if (!isInside(dir, destination)) continue;
      await mkdir(path.dirname(destination), { recursive: true });
      await writeFile(destination, Buffer.from(file.data, 'base64'));
      if (file.executable) await chmod(destination, 0o755);
    }
  }
}

function isInside(parent: string, child: string): boolean {
  const relative = path.relative(parent, child);
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative);
}

/**
 * Packs `cwd` (minus `exclude`, paths relative to it) and hands the archive out in pieces; fails, and
 * stops packing, once it exceeds `maxBytes`. Answers the archive's size.
 */
export function exportWorkspace(
  cwd: string,
  options: { maxBytes: number; exclude?: string[] | undefined },
  onPiece: (piece: Buffer) => void,
): Promise<number> {
  const excludes = (options.exclude ?? []).map((pattern) => `--exclude=./${pattern.replace(/^\.?\/+/, '')}`);
  const tar = spawn('tar', ['-C', cwd, ...excludes, '-czf', '-', '.'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let bytes = 0;
  let tooBig = false;
  const stderr: string[] = [];
  tar.stderr.on('data', (chunk: Buffer) => stderr.push(chunk.toString('utf8')));
  tar.stdout.on('data', (chunk: Buffer) => {
    if (tooBig) return;
    bytes += chunk.length;
    if (bytes > options.maxBytes) {
      tooBig = true;
      tar.kill('SIGKILL');
      return;
    }
    onPiece(chunk);
  });
  return new Promise((resolve, reject) => {
    tar.once('error', (error) => reject(new Error(`packing the workspace failed: ${error.message}`)));
    tar.once('close', (code) => {
      if (tooBig) reject(new Error(`the workspace archive exceeds ${options.maxBytes} bytes`));
      else if (code !== 0) reject(new Error(`packing the workspace failed (tar exit ${code}): ${stderr.join('').trim().slice(-500)}`));
      else resolve(bytes);
    });
  });
}

/** Unpacks a gzipped tar into `cwd`, fed piece by piece; `end` resolves once it is unpacked. */
export function importWorkspace(cwd: string): { write(piece: Buffer): void; end(): Promise<void> } {
  const tar = spawn('tar', ['-C', cwd, '--no-same-owner', '--no-same-permissions', '-xzf', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
  const stderr: string[] = [];
  tar.stderr.on('data', (chunk: Buffer) => stderr.push(chunk.toString('utf8')));
  // A tar that failed early stops reading: the write error is reported by the exit status below.
  tar.stdin.on('error', () => undefined);
  const done = new Promise<void>((resolve, reject) => {
    tar.once('error', (error) => reject(new Error(`unpacking the workspace failed: ${error.message}`)));
    tar.once('close', (code) => {
      if (code === 0) resolve();
      else reject(new Error(`unpacking the workspace failed (tar exit ${code}): ${stderr.join('').trim().slice(-500)}`));
    });
  });
  done.catch(() => undefined);
  return {
    write(piece) {
      tar.stdin.write(piece);
    },
    end() {
      tar.stdin.end();
      return done;
    },
  };
}
