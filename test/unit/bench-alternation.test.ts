import { describe, expect, it } from 'vitest';
import { Alternation } from '../../hack/bench/alternation.js';

/** A loop of `steps` slots that records, for each, its name and whether another slot ran meanwhile. */
async function loop(
  alternation: Alternation,
  index: number,
  name: string,
  steps: number,
  log: string[],
  running: { now: number },
): Promise<void> {
  const slot = alternation.slotOf(index);
  try {
    for (let step = 0; step < steps; step++) {
      await slot(async () => {
        running.now += 1;
        log.push(`${name}${step}${running.now > 1 ? ' overlapped' : ''}`);
        // Yield a few times inside the slot, as a measured turn does.
        for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
        running.now -= 1;
      });
    }
  } finally {
    alternation.end(index);
  }
}

describe('bench alternation of measuring loops', () => {
  it('gives the machine to the loops in turn, one slot at a time, and to the one left once the other has ended', async () => {
    const alternation = new Alternation(2);
    const log: string[] = [];
    const running = { now: 0 };
    await Promise.all([loop(alternation, 0, 'a', 2, log, running), loop(alternation, 1, 'b', 4, log, running)]);
    expect(log).toEqual(['a0', 'b0', 'a1', 'b1', 'b2', 'b3']);
  });

  it('passes the machine on when a slot fails, and the failure reaches its loop', async () => {
    const alternation = new Alternation(2);
    const order: string[] = [];
    const failing = (async () => {
      try {
        await alternation.slotOf(0)(async () => {
          order.push('a0');
          throw new Error('turn failed');
        });
      } finally {
        alternation.end(0);
      }
    })();
    const other = loop(alternation, 1, 'b', 2, order, { now: 0 });
    await expect(failing).rejects.toThrow('turn failed');
    await other;
    expect(order).toEqual(['a0', 'b0', 'b1']);
  });

  it('does not wait for a loop that ends without taking a slot', async () => {
    const alternation = new Alternation(2);
    alternation.end(0);
    const log: string[] = [];
    await loop(alternation, 1, 'b', 2, log, { now: 0 });
    expect(log).toEqual(['b0', 'b1']);
  });
});
