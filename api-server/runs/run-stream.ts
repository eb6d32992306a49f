import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { type Db, json } from '../core/db/database.js';

export type StreamLine = Record<string, unknown>;

/** A line of the platform's own (`queued`, `approval`, `message_end`, `error`, ...), beside the agent's verbatim events. */
export function platformLine(type: string, fields: Record<string, unknown> = {}): StreamLine {
  return { object: 'platform.event', type, ...fields };
}

const FLUSH_INTERVAL_MS = 50;
const FLUSH_BATCH = 200;
const STORED_POLL_MS = 200;
/** How long a follower of stored lines waits for the terminal line once the run's status has ended. */
const ENDED_GRACE_MS = 5_000;

/** A line that ends a complete stream: the agent's `result` or a platform `error`. */
export function isTerminalLine(line: StreamLine): boolean {
  return line.type === 'result' || (line.object === 'platform.event' && line.type === 'error');
}

/**
 * The lines of one run (one assistant message), numbered from 1. Live subscribers get each line
 * at once; every line is also written to `run_lines` (in small batches) so a client that lost its
 * stream can re-attach later, on any node, with `after=N`.
 */
export class RunStream {
  private readonly lines: StreamLine[] = [];
  private readonly waiters = new Set<() => void>();
  private unsaved: { seq: number; line: StreamLine }[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private flushTimer: NodeJS.Timeout | undefined;
  private ended = false;

  constructor(
    readonly messageId: string,
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly now: () => Date,
  ) {}

  get length(): number {
    return this.lines.length;
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** Appends a line; after a terminal line nothing more is accepted. */
  append(line: StreamLine): void {
    if (this.ended) return;
    this.lines.push(line);
    this.unsaved.push({ seq: this.lines.length, line });
    if (isTerminalLine(line)) this.ended = true;
    if (this.ended || this.unsaved.length >= FLUSH_BATCH) void this.flush();
    else this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_INTERVAL_MS);
    for (const wake of this.waiters) wake();
    this.waiters.clear();
  }

  /** Resolves once every appended line is stored. */
  flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const batch = this.unsaved;
    this.unsaved = [];
    if (batch.length > 0) {
      const createdAt = this.now();
      this.flushing = this.flushing.then(async () => {
        try {
          await this.db
            .insertInto('run_lines')
            .values(batch.map(({ seq, line }) => ({ message_id: this.messageId, seq, line: json(line), created_at: createdAt })))
            .onConflict((oc) => oc.columns(['message_id', 'seq']).doNothing())
            .execute();
        } catch (err) {
          this.logger.error({ err, message_id: this.messageId }, 'storing stream lines failed');
        }
      });
    }
    return this.flushing;
  }

  /** Lines after `after` (a count of lines already seen), then live ones until the terminal line. */
  async *follow(after: number, signal: AbortSignal): AsyncGenerator<StreamLine> {
    let next = after;
    while (!signal.aborted) {
      while (next < this.lines.length) {
        yield this.lines[next] as StreamLine;
        next++;
      }
      if (this.ended) return;
      await new Promise<void>((resolve) => {
        // One listener per wait, removed when a line wakes us: a long run must not pile them up.
        const onAbort = () => resolve();
        signal.addEventListener('abort', onAbort, { once: true });
        this.waiters.add(() => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        });
      });
    }
  }
}

/**
 * Re-attach to a run hosted elsewhere (or finished): replay stored lines, poll until the terminal one.
 * The message's status changes before its last lines (`message_end`, the terminal line) are stored,
 * so an ended status alone does not end the stream: it ends at the stored terminal line, or after a
 * grace period when none is ever stored (a writer that died between the two).
 */
export async function* followStoredRun(db: Db, messageId: string, after: number, signal: AbortSignal): AsyncGenerator<StreamLine> {
  let next = after;
  let endedSince: number | undefined;
  while (!signal.aborted) {
    const rows = await db
      .selectFrom('run_lines')
      .select(['seq', 'line'])
      .where('message_id', '=', messageId)
      .where('seq', '>', next)
      .orderBy('seq')
      .execute();
    for (const row of rows) {
      if (row.seq !== next + 1) break; // a gap: the writer has not stored it yet, read again
      next = row.seq;
      yield row.line as StreamLine;
      if (isTerminalLine(row.line as StreamLine)) return;
    }
    if (rows.length === 0 && (await endedAtOrBefore(db, messageId, next))) return; // `after` is at or past the end
    const status = await db.selectFrom('messages').select('status').where('id', '=', messageId).executeTakeFirst();
    if (!status) return;
    if (status.status !== 'in_progress') {
      endedSince ??= Date.now();
      if (Date.now() - endedSince >= ENDED_GRACE_MS) return;
    }
    await sleep(STORED_POLL_MS, undefined, { signal }).catch(() => undefined);
  }
}

/** Whether the run's stored lines end with its terminal line at or before `seq` (none are left after it). */
async function endedAtOrBefore(db: Db, messageId: string, seq: number): Promise<boolean> {
  const last = await db
    .selectFrom('run_lines')
    .select(['seq', 'line'])
    .where('message_id', '=', messageId)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();
  return last !== undefined && last.seq <= seq && isTerminalLine(last.line as StreamLine);
}
