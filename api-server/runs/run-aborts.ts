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
import type { Logger } from 'pino';
import { ChannelListener } from '../core/db/channel-listener.js';
import type { Db } from '../core/db/database.js';

const CHANNEL = 'acis_run_abort';

export interface RunAbort {
  runId: string;
  alias: string;
  /** Set when a bound secret was sent toward this destination (secret-destination-denied), not missing. */
  destination?: string | undefined;
}

export class RunAbortSignals {
  private readonly listener: ChannelListener;

  constructor(
    private readonly deps: {
      db: Db;
      /** The LISTEN connection's database (PostgreSQL: the embedded database has no other replica to signal). */
      databaseUrl: string;
      logger: Logger;
      /** Ends the run if this replica hosts it. */
      onAbort: (abort: RunAbort) => void;
    },
  ) {
    this.listener = new ChannelListener({
      databaseUrl: deps.databaseUrl,
      channel: CHANNEL,
      logger: deps.logger,
      name: 'run abort signal',
      onNotification: (payload) => {
        const abort = parseAbort(payload);
        if (abort) deps.onAbort(abort);
      },
    });
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }

  /** Tells every replica (this one too) to end `runId` for the missing `alias`. */
  async send(abort: RunAbort): Promise<void> {
    await sql`select pg_notify(${CHANNEL}, ${JSON.stringify(abort)})`.execute(this.deps.db);
  }
}

function parseAbort(payload: string): RunAbort | undefined {
  try {
    const value = JSON.parse(payload) as Partial<RunAbort>;
    if (typeof value.runId !== 'string' || typeof value.alias !== 'string') return undefined;
    return { runId: value.runId, alias: value.alias, destination: typeof value.destination === 'string' ? value.destination : undefined };
  } catch {
    return undefined;
  }
}
