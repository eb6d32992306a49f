import { mkdir, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { directorySize } from '../../api-server/sandboxes/local/workspace-size.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'acis-workspace-size-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('directorySize(dir, limit)', () => {
  it('counts files in nested directories, at least their apparent size', async () => {
    await mkdir(path.join(dir, 'a', 'b'), { recursive: true });
    await writeFile(path.join(dir, 'a', 'one'), Buffer.alloc(10_000));
    await writeFile(path.join(dir, 'a', 'b', 'two'), Buffer.alloc(20_000));
    const size = await directorySize(dir, Number.MAX_SAFE_INTEGER);
    expect(size).toBeGreaterThanOrEqual(30_000);
    expect(size).toBeLessThan(30_000 + 64 * 1024);
  });

  it('counts a sparse file at its apparent size (copying it would write every byte)', async () => {
    const file = await open(path.join(dir, 'sparse'), 'w');
    await file.truncate(50 * 1024 * 1024);
    await file.close();
    expect(await directorySize(dir, Number.MAX_SAFE_INTEGER)).toBeGreaterThanOrEqual(50 * 1024 * 1024);
  });

  it('stops walking once past the limit', async () => {
    for (let i = 0; i < 50; i++) await writeFile(path.join(dir, `f${i}`), Buffer.alloc(1000));
    const size = await directorySize(dir, 5_000);
    expect(size).toBeGreaterThan(5_000);
    expect(size).toBeLessThan(50_000);
  });

  it('counts a missing directory as empty', async () => {
    expect(await directorySize(path.join(dir, 'gone'), 1)).toBe(0);
  });
});
