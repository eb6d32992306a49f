/**
 * One PostgreSQL LISTEN connection on one channel, for signals between API nodes (approvals decided,
 * runs to abort). When it drops it is re-opened every second until it is back; a failure at start
 * fails the start. Notifications sent while no connection listened are lost, so `onListening` runs
 * on every (re)connect for the caller to re-read what it waits on.
 */
import pg from 'pg';
import type { Logger } from 'pino';

const RECONNECT_MS = 1_000;

export interface ChannelListenerOptions {
  databaseUrl: string;
  channel: string;
  logger: Logger;
  /** What the signals are for, in log lines ("approval signal"). */
  name: string;
  onNotification: (payload: string) => void;
  onListening?: () => void;
}

export class ChannelListener {
  private client: pg.Client | undefined;
  private reconnect: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: ChannelListenerOptions) {}

  start(): Promise<void> {
    return this.listen();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnect);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async listen(): Promise<void> {
    const { channel, logger, name } = this.options;
    const client = new pg.Client({ connectionString: this.options.databaseUrl });
    client.on('notification', (message) => {
      if (message.channel === channel && message.payload) this.options.onNotification(message.payload);
    });
    client.on('error', (err) => {
      if (this.client !== client) return;
      logger.warn({ err }, `${name} connection lost; reconnecting`);
      this.client = undefined;
      client.end().catch(() => undefined);
      this.scheduleReconnect();
    });
    try {
      await client.connect();
      await client.query(`listen ${channel}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    this.client = client;
    this.options.onListening?.();
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.reconnect) return;
    this.reconnect = setTimeout(() => {
      this.reconnect = undefined;
      if (this.stopped) return;
      this.listen().catch((err: unknown) => {
        this.options.logger.warn({ err }, `${this.options.name} connection failed; retrying`);
        this.scheduleReconnect();
      });
    }, RECONNECT_MS);
    this.reconnect.unref();
  }
}
