/**
 * `npm run stub -- [--port N] [--host H] [--api-key K]`: runs the model stub in the foreground and logs one line
 * per request, so the service (ANTHROPIC_BASE_URL) can be tried by hand without the model vendor.
 */
import { parseArgs } from 'node:util';
import { startModelStub } from './model-stub.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8788' },
    host: { type: 'string', default: '127.0.0.1' },
    'api-key': { type: 'string' },
  },
});

const stub = await startModelStub({
  port: Number(values.port),
  host: values.host,
  apiKey: values['api-key'],
  log: (line) => console.log(line),
});
console.log(`model stub listening on ${stub.url} (set ANTHROPIC_BASE_URL=${stub.url})`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void stub.stop().then(() => process.exit(0)));
}
