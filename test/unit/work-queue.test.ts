import { describe, expect, it } from 'vitest';
import { WorkQueue } from '../../kube/work-queue.js';

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('WorkQueue', () => {
  it('processes one key at a time; a key added while in process runs once more after it', async () => {
    const gate = deferred();
    const seen: string[] = [];
    let concurrent = 0;
    let maxConcurrent = 0;
    const queue = new WorkQueue(
      async (key) => {
        seen.push(key);
        concurrent++;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        if (seen.length === 1) await gate.promise;
        concurrent--;
        return {};
      },
      { workers: 4 },
    );
    queue.start();
    queue.add('ns/a');
    queue.add('ns/a');
    queue.add('ns/a');
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual(['ns/a']);
    gate.resolve();
    await queue.idle();
    expect(seen).toEqual(['ns/a', 'ns/a']);
    expect(maxConcurrent).toBe(1);
  });

  it('different keys run in parallel up to the worker count, in arrival order', async () => {
    const gates = [deferred(), deferred(), deferred()];
    const started: string[] = [];
    const queue = new WorkQueue(
      async (key) => {
        started.push(key);
        await gates[Number(key.slice(-1))]!.promise;
        return {};
      },
      { workers: 2 },
    );
    queue.start();
    for (const key of ['ns/0', 'ns/1', 'ns/2']) queue.add(key);
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toEqual(['ns/0', 'ns/1']);
    expect(queue.depth).toBe(1);
    gates[0]!.resolve();
    gates[1]!.resolve();
    gates[2]!.resolve();
    await queue.idle();
    expect(started).toEqual(['ns/0', 'ns/1', 'ns/2']);
  });

  it('retries a failing key with exponential backoff and resets after a success', async () => {
    const times: number[] = [];
    const errors: number[] = [];
    const done = deferred();
    const queue = new WorkQueue(
      async () => {
        times.push(Date.now());
        if (times.length < 4) throw new Error('conflict');
        done.resolve();
        return {};
      },
      { workers: 1, baseDelayMs: 20, onError: (_key, _error, retryInMs) => errors.push(retryInMs) },
    );
    queue.start();
    queue.add('ns/x');
    await done.promise;
    expect(errors).toEqual([20, 40, 80]);
    expect(times[3]! - times[0]!).toBeGreaterThanOrEqual(130);
  });

  it('requeues at the time a reconcile asks for, keeping only the earliest deadline', async () => {
    const runs: number[] = [];
    const queue = new WorkQueue(
      async () => {
        runs.push(Date.now());
        return runs.length === 1 ? { requeueAt: Date.now() + 60 } : {};
      },
      { workers: 1 },
    );
    queue.start();
    queue.addAfter('ns/y', 10_000);
    queue.add('ns/y');
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(runs).toHaveLength(2);
    expect(runs[1]! - runs[0]!).toBeGreaterThanOrEqual(55);
    queue.stop();
  });

  it('once stopped takes nothing more', async () => {
    let runs = 0;
    const queue = new WorkQueue(async () => ({ requeueAt: void runs++ }), { workers: 1 });
    queue.start();
    queue.stop();
    queue.add('ns/z');
    await queue.idle();
    expect(runs).toBe(0);
  });
});
