/**
 * The size limit of a local runner's writable directories (its workspace and HOME): bubblewrap
 * cannot bound a bind mount, so the size is measured, every second while the runner holds a turn
 * and once more before its workspace is saved back to its conversation. Fail-safe direction: an
 * entry that cannot be read counts as nothing, but the walk stops (and reports "over") as soon as
 * the running total passes the limit, so a tree of millions of files costs one limit's worth of walk.
 */
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';

export const WATCH_INTERVAL_MS = 1_000;

/**
 * Bytes under `dir`, counting each entry at its apparent size or its allocated blocks, whichever is
 * larger (a sparse file costs its full size when the workspace is copied); stops counting once past `limit`.
 */
export async function directorySize(dir: string, limit: number): Promise<number> {
  let total = 0;
  const pending = [dir];
  while (pending.length > 0 && total <= limit) {
    const current = pending.pop()!;
    const names = await readdir(current).catch(() => [] as string[]);
    for (const name of names) {
      const entry = path.join(current, name);
      const stat = await lstat(entry).catch(() => undefined);
      if (!stat) continue;
      total += Math.max(stat.size, stat.blocks * 512);
      if (stat.isDirectory()) pending.push(entry);
      if (total > limit) break;
    }
  }
  return total;
}

/**
 * Measures `dir` every second until the returned stop is called; calls `onExceeded` once (and
 * measures no more) when it is past `limit`.
 */
export function watchDirectorySize(dir: string, limit: number, onExceeded: (bytes: number) => void): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const check = async () => {
    const bytes = await directorySize(dir, limit);
    if (stopped) return;
    if (bytes > limit) {
      stopped = true;
      onExceeded(bytes);
      return;
    }
    timer = setTimeout(check, WATCH_INTERVAL_MS);
  };
  timer = setTimeout(check, WATCH_INTERVAL_MS);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
