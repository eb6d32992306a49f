import { PassThrough } from 'node:stream';
import type { Context } from 'koa';

export const PING_LINE = '{"event":"ping"}\n';

/**
 * Serves `lines` as an NDJSON response with keepalive pings. When the client goes away Koa
 * destroys the body; that only aborts this reader (the run it reads goes on).
 */
export function sendNdjson(
  ctx: Context,
  lines: (signal: AbortSignal) => AsyncIterable<object>,
  options: { pingIntervalMs: number; headers?: Record<string, string> },
): void {
  const body = new PassThrough();
  const detach = new AbortController();
  body.on('close', () => detach.abort());
  ctx.req.on('close', () => detach.abort());
  ctx.status = 200;
  ctx.type = 'application/x-ndjson';
  for (const [name, value] of Object.entries(options.headers ?? {})) ctx.set(name, value);
  ctx.set('Cache-Control', 'no-store');
  ctx.set('X-Accel-Buffering', 'no');
  ctx.body = body;

  const ping = setInterval(() => {
    if (!body.writableEnded) body.write(PING_LINE);
  }, options.pingIntervalMs);
  ping.unref();

  void (async () => {
    try {
      for await (const line of lines(detach.signal)) {
        if (body.destroyed) break;
        body.write(`${JSON.stringify(line)}\n`);
      }
    } finally {
      clearInterval(ping);
      if (!body.destroyed) body.end();
    }
  })();
}
