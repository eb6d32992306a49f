/**
 * Turn-by-turn alternation between measuring loops that run concurrently (the SDK floors and the ACIS
 * cases held to them): each measured turn, and each heavy step around them (a server starting, a host
 * compiled), runs in a slot of its loop, and the slots go to the loops in turn, one at a time. So a
 * floor and the case held to it are measured in the same minutes, turn by turn, rather than one
 * block after the other (a shared machine's pace drifts over minutes). A loop that has ended gives
 * up its slots.
 */
export type Slot = <T>(run: () => Promise<T>) => Promise<T>;

/** Runs each step at once: a loop measured alone. */
export const alone: Slot = (run) => run();

export class Alternation {
  private next = 0;
  private readonly ended = new Set<number>();
  private readonly waiting = new Map<number, () => void>();

  constructor(private readonly loops: number) {}

  /** The slot function of loop `loop` (0 … loops-1). */
  slotOf(loop: number): Slot {
    return (run) => this.slot(loop, run);
  }

  /** The loop has no more steps: the others go on without waiting for it. */
  end(loop: number): void {
    this.ended.add(loop);
    if (this.next === loop) this.pass(loop);
  }

  private async slot<T>(loop: number, run: () => Promise<T>): Promise<T> {
    while (this.next !== loop) await new Promise<void>((resolve) => this.waiting.set(loop, resolve));
    try {
      return await run();
    } finally {
      this.pass(loop);
    }
  }

  /** The next loop that has not ended takes the machine (the same one when it is the last). */
  private pass(from: number): void {
    for (let step = 1; step <= this.loops; step++) {
      const candidate = (from + step) % this.loops;
      if (!this.ended.has(candidate)) {
        this.next = candidate;
        break;
      }
    }
    const wake = this.waiting.get(this.next);
    this.waiting.delete(this.next);
    wake?.();
  }
}
