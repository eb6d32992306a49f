import { afterEach, describe, expect, it } from 'vitest';
import type { Channel } from '../../runner/channel.js';
import { type DrainServer, serveDrain } from '../../runner/drain-server.js';
import { encodeControl, LinkEndpoint } from '../../runner/link.js';

/** One connection's end as the link sees it: closed by the test (the peer went) or by the link. */
function wire(): Channel & { drop(reason: string): void; deliver(line: string): void } {
  const lines: Array<(line: string) => void> = [];
  const closed: Array<(reason: string) => void> = [];
  let open = true;
  const drop = (reason: string) => {
    if (!open) return;
    open = false;
    for (const listener of closed) listener(reason);
  };
  return {
    send: () => {},
    onLine: (listener) => lines.push(listener),
    onClosed: (listener) => closed.push(listener),
    close: (reason = 'closed') => drop(reason),
    drop,
    deliver: (line) => {
      for (const listener of lines) listener(line);
    },
  };
}

let server: DrainServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function drainServer(link: LinkEndpoint): Promise<string> {
  server = await serveDrain({ host: '127.0.0.1', port: 0, link });
  return `http://127.0.0.1:${server.port}`;
}

describe('serveDrain({ link }): GET /drain, the preStop hook', () => {
  it('answers at once when no API server is connected, and 404 elsewhere', async () => {
    const url = await drainServer(new LinkEndpoint());
    const response = await fetch(`${url}/drain`);
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('drained\n');
    expect((await fetch(`${url}/other`)).status).toBe(404);
  });

  it('waits while an API server is connected, until it says goodbye', async () => {
    const link = new LinkEndpoint();
    const connection = wire();
    link.attach(connection, 0);
    const url = await drainServer(link);
    let answered = false;
    const drained = fetch(`${url}/drain`).then((response) => {
      answered = true;
      return response;
    });
    // A round trip that the server has surely taken in the meantime: the hook is still waiting.
    expect((await fetch(`${url}/other`)).status).toBe(404);
    expect(answered).toBe(false);
    connection.deliver(encodeControl({ type: 'bye' }));
    expect((await drained).status).toBe(200);
    expect(link.isEnded).toBe(true);
  });

  it('answers when the API connection drops, and settle() waits for the answers being written', async () => {
    const link = new LinkEndpoint();
    const connection = wire();
    link.attach(connection, 0);
    const url = await drainServer(link);
    const drained = fetch(`${url}/drain`);
    expect((await fetch(`${url}/other`)).status).toBe(404);
    connection.drop('reset');
    await server!.settle();
    expect((await drained).status).toBe(200);
  });
});
