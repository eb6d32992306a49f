/**
 * Aborting a run on whichever API replica hosts it. Under the kubernetes provider a runner pod's
 * request may reach the egress proxy of any replica; when it names a secret the run lacks, the proxy
 * refuses it (422) and the run must end `missing-secret` where it runs. The proxy's replica finds the
 * run in the shared egress records and signals it through PostgreSQL NOTIFY on `acis_run_abort`;
 * every replica LISTENs and the one hosting the run ends it. Fail-safe direction: a signal lost while
 * a LISTEN connection was down leaves the run going, but the request that named the missing secret
 * was refused all the same, so no value and no unresolved placeholder left the cluster.
 */
import { sql } from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';
import type { Db } from '../core/db/database.js';

const CHANNEL = 'acis_run_abort';
const RECONNECT_MS = 1_000;

export interface RunAbort {
  runId: string;
  alias: string;
}

export class RunAbortSignals {
  private listener: pg.Client | undefined;
  private reconnect: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly deps: {
      db: Db;
      /** The LISTEN connection's database (PostgreSQL: the embedded database has no other replica to signal). */
      databaseUrl: string;
      logger: Logger;
      /** Ends the run if this replica hosts it. */
      onAbort: (abort: RunAbort) => void;
    },
  ) {}

  async start(): Promise<void> {
    await this.listen();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnect);
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
  }

  /** Tells every replica (this one too) to end `runId` for the missing `alias`. */
  async send(abort: RunAbort): Promise<void> {
    await sql`select pg_notify(${CHANNEL}, ${JSON.stringify(abort)})`.execute(this.deps.db);
  }

  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.deps.databaseUrl });
    client.on('notification', (message) => {
      if (message.channel !== CHANNEL || !message.payload) return;
      const abort = parseAbort(message.payload);
      if (abort) this.deps.onAbort(abort);
    });
    client.on('error', (err) => {
      if (this.listener !== client) return;
      this.deps.logger.warn({ err }, 'run abort signal connection lost; reconnecting');
      this.listener = undefined;
      client.end().catch(() => undefined);
      this.scheduleReconnect();
    });
    try {
      await client.connect();
      await client.query(`listen ${CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    this.listener = client;
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.reconnect) return;
    this.reconnect = setTimeout(() => {
      this.reconnect = undefined;
      if (this.stopped) return;
      this.listen().catch((err: unknown) => {
        this.deps.logger.warn({ err }, 'run abort signal connection failed; retrying');
        this.scheduleReconnect();
      });
    }, RECONNECT_MS);
    this.reconnect.unref();
  }
}

function parseAbort(payload: string): RunAbort | undefined {
  try {
    const value = JSON.parse(payload) as Partial<RunAbort>;
    return typeof value.runId === 'string' && typeof value.alias === 'string' ? { runId: value.runId, alias: value.alias } : undefined;
  } catch {
    return undefined;
  }
}
