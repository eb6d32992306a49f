import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { Logger } from 'pino';
import { type Db, isForeignKeyViolation, json } from '../core/db/database.js';

export type StreamLine = Record<string, unknown>;

/** A line of the platform's own (`queued`, `approval`, `message_end`, `error`, ...), beside the agent's verbatim events. */
export function platformLine(type: string, fields: Record<string, unknown> = {}): StreamLine {
  return { object: 'platform.event', type, ...fields };
}

const FLUSH_BATCH = 200;
const RETRY_FIRST_MS = 50;
const RETRY_MAX_MS = 2_000;
const STORED_POLL_MS = 200;
/** How long a follower of stored lines waits for the terminal line once the run's status has ended. */
const ENDED_GRACE_MS = 5_000;

/** A line that ends a complete stream: the agent's `result` or a platform `error`. */
export function isTerminalLine(line: StreamLine): boolean {
  return line.type === 'result' || (line.object === 'platform.event' && line.type === 'error');
}

/**
 * The lines of one run (one assistant message), numbered from 1. Every line is stored in
 * `run_lines` and reaches live subscribers only once the transaction that stored it committed, so
 * the numbers a client counts are the stored ones: after a crash of this node, the replay any node
 * serves holds every line a client saw, with the same number. Writes are grouped: the first line
 * goes to the database at once, and the lines that arrive while a write is in flight go together in
 * the next one (one write in flight per run, at most FLUSH_BATCH lines each). A write that fails is
 * retried, with growing pauses: its lines, and those behind them, wait for it.
 */
export class RunStream {
  private readonly lines: StreamLine[] = [];
  private readonly waiters = new Set<() => void>();
  /** How many lines are stored (and so released to subscribers). */
  private stored = 0;
  private writing = false;
  private ended = false;

  constructor(
    readonly messageId: string,
    private readonly db: Db,
    /** The run's logger (it names the run and its request). */
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
    if (isTerminalLine(line)) this.ended = true;
    this.writeNext();
  }

  /** Resolves once every line appended so far is stored. */
  async flush(): Promise<void> {
    const target = this.lines.length;
    while (this.stored < target) await this.storedChange();
  }

  /** Lines after `after` (a count of lines already seen), then live ones until the terminal line, each once it is stored. */
  async *follow(after: number, signal: AbortSignal): AsyncGenerator<StreamLine> {
    let next = after;
    while (!signal.aborted) {
      while (next < this.stored) {
        const line = this.lines[next] as StreamLine;
        yield line;
        next++;
        if (isTerminalLine(line)) return;
      }
      if (this.ended && this.stored === this.lines.length) return;
      await this.storedChange(signal);
    }
  }

  /** Resolves at the next stored batch (or when `signal` aborts). */
  private storedChange(signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      // One listener per wait, removed when a batch wakes us: a long run must not pile them up.
      const onAbort = () => {
        this.waiters.delete(wake);
        resolve();
      };
      const wake = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.add(wake);
    });
  }

  /** Lines up to `to` are stored: subscribers get them, and the next batch goes. */
  private released(to: number): void {
    this.writing = false;
    this.stored = to;
    for (const wake of this.waiters) wake();
    this.waiters.clear();
    this.writeNext();
  }

  /** Starts the next write unless one is in flight or nothing waits to be stored. */
  private writeNext(failures = 0): void {
    if (this.writing || this.stored === this.lines.length) return;
    this.writing = true;
    const from = this.stored;
    const to = Math.min(this.lines.length, from + FLUSH_BATCH);
    storeLines(this.db, this.messageId, from, this.lines.slice(from, to), this.now()).then(
      () => this.released(to),
      (err: unknown) => {
        // The message was deleted with its conversation mid-run: there is no replay left to match.
        if (isForeignKeyViolation(err)) return this.released(to);
        this.logger.error({ err, attempt: failures + 1 }, 'storing stream lines failed; retrying');
        setTimeout(
          () => {
            this.writing = false;
            this.writeNext(failures + 1);
          },
          Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** failures),
        ).unref();
      },
    );
  }
}

/**
 * Stores lines `from + 1`... of a run in one statement. Its commit does not wait for the WAL to reach
 * the disk (`synchronous_commit` off for this transaction alone): it is visible to every replica at
 * once and survives any replica's death, which is what releasing the lines to clients needs, and the
 * first line of a turn does not wait for an fsync (several ms on a busy disk). A crash of PostgreSQL
 * itself may lose the last fraction of a second of such lines.
 */
async function storeLines(db: Db, messageId: string, from: number, lines: StreamLine[], createdAt: Date): Promise<void> {
  const rows = lines.map((line, i) => ({ seq: from + i + 1, line }));
  await sql`
    insert into run_lines (message_id, seq, line, created_at)
    select ${messageId}, r.seq, r.line, ${createdAt}
    from jsonb_to_recordset(${json(rows)}::jsonb) as r(seq integer, line jsonb)
    where set_config('synchronous_commit', 'off', true) is not null
    on conflict (message_id, seq) do nothing
  `.execute(db);
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
