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

/** What a run's stream needs: where to store, and which node it stores for. */
export interface RunStreamDeps {
  db: Db;
  /** The run's logger (it names the run and its request). */
  logger: Logger;
  now: () => Date;
  /** Lines are stored only while the run's message names this node as its host (a node taken for dead stores nothing more). */
  nodeId: string;
}

/**
 * The lines of one run (one assistant message), numbered from 1. Every line is stored in
 * `run_lines` and reaches live subscribers only once the transaction that stored it committed, so
 * the numbers a client counts are the stored ones: after a crash of this node, the replay any node
 * serves holds every line a client saw, with the same number. Writes are grouped: the lines appended
 * in one go (one runner line's, say) go to the database together as soon as this go is over, and the
 * lines that arrive while a write is in flight go together in the next one (one write in flight per
 * run, at most FLUSH_BATCH lines each, never splitting one runner line's). A write that fails is
 * retried, with growing pauses: its lines, and those behind them, wait for it.
 *
 * A line that came from the runner carries its number on the runner's link (`origin`), stored with it:
 * once stored, the runner is told (`onSettled`) it need not keep it for a replica taking the run over.
 */
export class RunStream {
  private readonly lines: StreamLine[] = [];
  private readonly origins: Array<number | undefined> = [];
  private readonly waiters = new Set<() => void>();
  /** How many lines are stored (and so released to subscribers). */
  private stored = 0;
  private writing = false;
  private writeQueued = false;
  private ended = false;
  private settledOrigin = 0;
  private settledListener: ((origin: number) => void) | undefined;

  /** `storedLines`: the lines a run taken over already has (stored by the node that died), numbered from 1. */
  constructor(
    readonly messageId: string,
    private readonly deps: RunStreamDeps,
    storedLines: StreamLine[] = [],
  ) {
    this.lines.push(...storedLines);
    this.origins.push(...storedLines.map(() => undefined));
    this.stored = storedLines.length;
    this.ended = storedLines.some(isTerminalLine);
  }

  /** Told the highest runner line number stored, as it grows. */
  onSettled(listener: (origin: number) => void): void {
    this.settledListener = listener;
  }

  get length(): number {
    return this.lines.length;
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** Appends a line (`origin`: the runner line it came from); after a terminal line nothing more is accepted. */
  append(line: StreamLine, origin?: number): void {
    if (this.ended) return;
    this.lines.push(line);
    this.origins.push(origin);
    if (isTerminalLine(line)) this.ended = true;
    // The lines appended in this go (a runner line may make several) go in one write.
    if (this.writeQueued) return;
    this.writeQueued = true;
    queueMicrotask(() => {
      this.writeQueued = false;
      this.writeNext();
    });
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
    const from = this.stored;
    this.stored = to;
    this.settle(from, to);
    for (const wake of this.waiters) wake();
    this.waiters.clear();
    this.writeNext();
  }

  /** Lines `from`..`to` are stored: the runner lines they came from are settled. */
  private settle(from: number, to: number): void {
    let highest = this.settledOrigin;
    for (let i = from; i < to; i++) highest = Math.max(highest, this.origins[i] ?? 0);
    if (highest === this.settledOrigin) return;
    this.settledOrigin = highest;
    this.settledListener?.(highest);
  }

  /** Starts the next write unless one is in flight or nothing waits to be stored. */
  private writeNext(failures = 0): void {
    if (this.writing || this.stored === this.lines.length) return;
    this.writing = true;
    const from = this.stored;
    let to = Math.min(this.lines.length, from + FLUSH_BATCH);
    // Never half a runner line's lines: a replica taking over resumes the runner after the last one stored.
    while (to < this.lines.length && this.origins[to] !== undefined && this.origins[to] === this.origins[to - 1]) to++;
    const rows = this.lines.slice(from, to).map((line, i) => ({ seq: from + i + 1, line, link_seq: this.origins[from + i] ?? null }));
    storeLines(this.deps, this.messageId, rows).then(
      () => this.released(to),
      (err: unknown) => {
        // The message was deleted with its conversation mid-run: there is no replay left to match.
        if (isForeignKeyViolation(err)) return this.released(to);
        this.deps.logger.error({ err, attempt: failures + 1 }, 'storing stream lines failed; retrying');
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
 * Stores lines of a run in one statement. Its commit does not wait for the WAL to reach the disk
 * (`synchronous_commit` off for this transaction alone): it is visible to every replica at once and
 * survives any replica's death, which is what releasing the lines to clients needs, and the first
 * line of a turn does not wait for an fsync (several ms on a busy disk). A crash of PostgreSQL itself
 * may lose the last fraction of a second of such lines. Nothing is stored once the run's message no
 * longer names this node (another took the run over, taking this one for dead): the fence that keeps
 * two nodes from writing one run.
 */
async function storeLines(
  deps: RunStreamDeps,
  messageId: string,
  rows: Array<{ seq: number; line: StreamLine; link_seq: number | null }>,
): Promise<void> {
  await sql`
    insert into run_lines (message_id, seq, line, link_seq, created_at)
    select ${messageId}, r.seq, r.line, r.link_seq, ${deps.now()}
    from jsonb_to_recordset(${json(rows)}::jsonb) as r(seq integer, line jsonb, link_seq integer)
    where set_config('synchronous_commit', 'off', true) is not null
      and exists (select 1 from messages m where m.id = ${messageId} and m.node_id = ${deps.nodeId})
    on conflict (message_id, seq) do nothing
  `.execute(deps.db);
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
