/**
 * An API replica killed (SIGKILL) while it hosts a streaming run, local provider: two API server
 * processes on one database. Node A runs in the test process and survives; node B is `acis serve`
 * in its own process, hosts the run and is killed at several points of the turn. Whatever the
 * client received from B is stored with the same numbers (a line reaches a client only once it is
 * stored), A notices within seconds that B stopped renewing its liveness row, and the run ends
 * `failed` (its runner died with B) with `message_end` and the terminal `error` line, which a client
 * re-attaching on A with the count it had receives: every line once.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../api-server/config.js';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { expectFailedOnSurvivor, isDelta, killDuringTurn, livenessEnv, slowTurn, useReplicaPair } from '../helpers/replica-kill.js';

const MASTER_KEY = randomBytes(32).toString('base64');
/** Node A's view: B is gone once its row is this old (the default is 10 s; short here to keep the file quick). */
const STALE_SECONDS = 2;
/** Twelve text deltas, 150 ms apart: a turn in progress for about two seconds. */
const SLOW_TURN = slowTurn(12, 150);

let stub: ModelStub;
beforeAll(async () => {
  stub = await startModelStub();
});
afterAll(async () => {
  await stub?.stop();
});

/** B, killed and started again by the tests; A survives. */
const kit = useReplicaPair({
  name: 'replica crash',
  env: (databaseUrl) => ({
    DATABASE_URL: databaseUrl,
    ACIS_MASTER_KEY: MASTER_KEY,
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_POOL_SIZE: '0',
    ...livenessEnv(STALE_SECONDS),
  }),
});
/** B stopped renewing its row: A takes it for gone STALE_SECONDS later, at one of its beats. */
const WITHIN_MS = (STALE_SECONDS + 3) * 1000;

describe('a replica killed while it hosts a run (local provider)', () => {
  it('mid-stream: every line the client had is stored as numbered; the run ends failed within seconds', async () => {
    let deltas = 0;
    const run = await killDuringTurn(kit, SLOW_TURN, (line) => isDelta(line) && ++deltas === 4);
    expect(run.received.filter(isDelta).length).toBeGreaterThanOrEqual(4);
    await expectFailedOnSurvivor(kit, run, WITHIN_MS);
  }, 60_000);

  it('before the first line: the re-attached stream is message_end and the error line', async () => {
    const run = await killDuringTurn(kit, SLOW_TURN);
    expect(run.received).toEqual([]);
    await expectFailedOnSurvivor(kit, run, WITHIN_MS);
  }, 60_000);

  it('right before the terminal line: the run still ends failed, with one terminal line', async () => {
    const run = await killDuringTurn(kit, SLOW_TURN, (line) => line.type === 'assistant');
    expect(run.received.at(-1)?.type).toBe('assistant');
    await expectFailedOnSurvivor(kit, run, WITHIN_MS);
  }, 60_000);
});

describe('loadConfig: ACIS_NODE_HEARTBEAT_SECONDS, ACIS_NODE_STALE_SECONDS', () => {
  it('renews every 3 s and takes a node for gone after 10 s by default', () => {
    expect(loadConfig({})).toMatchObject({ nodeHeartbeatSeconds: 3, nodeStaleSeconds: 10 });
    expect(loadConfig({ ACIS_NODE_HEARTBEAT_SECONDS: '0.5', ACIS_NODE_STALE_SECONDS: '2' })).toMatchObject({
      nodeHeartbeatSeconds: 0.5,
      nodeStaleSeconds: 2,
    });
  });

  it('refuses a staleness shorter than two renewals, and values out of range, naming the variable', () => {
    expect(() => loadConfig({ ACIS_NODE_HEARTBEAT_SECONDS: '5', ACIS_NODE_STALE_SECONDS: '9' })).toThrow(
      /ACIS_NODE_STALE_SECONDS: must be at least twice ACIS_NODE_HEARTBEAT_SECONDS/,
    );
    expect(() => loadConfig({ ACIS_NODE_HEARTBEAT_SECONDS: '0' })).toThrow(ConfigError);
    expect(() => loadConfig({ ACIS_NODE_STALE_SECONDS: 'soon' })).toThrow(/ACIS_NODE_STALE_SECONDS/);
  });
});
