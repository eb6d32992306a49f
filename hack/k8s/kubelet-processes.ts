/**
 * Signals for a container's process tree. A container in bubblewrap is three processes: bubblewrap,
 * its init in the new pid namespace, and the program. bubblewrap neither forwards signals nor
 * reliably takes the program down when it dies, so the tree is walked through /proc.
 */
import { readdir, readFile } from 'node:fs/promises';

async function children(pid: number): Promise<number[]> {
  const found: number[] = [];
  const tasks = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
  for (const task of tasks) {
    const listed = await readFile(`/proc/${pid}/task/${task}/children`, 'utf8').catch(() => '');
    found.push(...listed.split(/\s+/).filter(Boolean).map(Number));
  }
  return found;
}

export async function descendants(pid: number): Promise<number[]> {
  const found: number[] = [];
  for (const child of await children(pid)) found.push(child, ...(await descendants(child)));
  return found;
}

const sleep = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/** Waits (briefly) until a process is stopped or gone, so it cannot be half-way through a fork. */
async function settled(pid: number): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
    const state = stat?.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === undefined || state === 'T' || state === 'Z' || state === 'X') return;
    await sleep(1);
  }
}

/**
 * SIGKILL for a container's whole process tree. bubblewrap's --die-with-parent does not reliably
 * take the sandboxed program down with it (the parent-death signal is lost when bubblewrap changes
 * credentials), so each process is stopped first (a stopped process cannot fork), its children are
 * found while they are still its children, and then all are killed.
 */
export async function killTree(pid: number): Promise<void> {
  const tree = [pid];
  for (let index = 0; index < tree.length; index++) {
    signal(tree[index]!, 'SIGSTOP');
    await settled(tree[index]!);
    tree.push(...(await children(tree[index]!)));
  }
  for (const member of tree) signal(member, 'SIGKILL');
}

/**
 * SIGTERM for the program inside a container: bubblewrap neither forwards it nor survives it (its
 * sandbox would be orphaned), so it goes to bubblewrap's descendants, once they exist.
 */
export async function terminateTree(pid: number, isolation: 'bwrap' | 'none'): Promise<void> {
  if (isolation === 'none') return signal(pid, 'SIGTERM');
  for (let attempt = 0; attempt < 50; attempt++) {
    const targets = await descendants(pid);
    // The sandbox is up once bubblewrap's own init has started the program.
    if (targets.length >= 2) {
      for (const target of targets) signal(target, 'SIGTERM');
      return;
    }
    await sleep(10);
  }
}

export function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}
