/**
 * A runner whose binary cannot be started (bubblewrap removed after the start check) ends at once
 * instead of leaving its turn and its recycling waiting for an exit that never comes.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { LocalRunner } from '../../api-server/sandboxes/local/runner.js';

describe('LocalRunner whose process cannot be spawned', () => {
  it('fails ready, ends its exit, answers a turn as crashed and can be killed', async () => {
    const runner = new LocalRunner(
      'run_nobinary',
      { file: '/nonexistent/acis-test/bwrap', args: [], env: {}, cwd: '/' },
      pino({ level: 'silent' }),
    );
    await expect(runner.ready).rejects.toThrow('runner could not be started: spawn /nonexistent/acis-test/bwrap ENOENT');
    await runner.exit;
    expect(runner.alive).toBe(false);
    expect(await runner.runTurn({ content: 'hi' }, () => undefined)).toEqual({ kind: 'crashed', error: 'runner is not running' });
    await runner.kill();
  });
});
