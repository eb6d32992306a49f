import { spawn } from 'node:child_process';
import type { Logger } from 'pino';
import { stdioChannel } from '../../../runner/stdio-channel.js';
import { ChannelRunner } from '../channel-runner.js';
import { DEFAULT_RUNNER_BOUNDS, type RunnerBounds } from '../runner.js';

/** How many recent stderr chunks a crash report quotes. */
const STDERR_TAIL_CHUNKS = 20;

/**
 * A runner process on this node (inside its bubblewrap sandbox), driven over its stdio. The process
 * is the runner's life: its exit ends the runner, with the tail of its stderr as the reason.
 */
export class LocalRunner extends ChannelRunner {
  constructor(
    id: string,
    command: { file: string; args: string[]; env: Record<string, string>; cwd: string },
    logger: Logger,
    bounds: RunnerBounds = DEFAULT_RUNNER_BOUNDS,
  ) {
    // Its own process group: a Ctrl-C meant for the server (which shuts down gracefully) must not kill
    // the runners of the turns it lets finish. They still die with the server (bwrap --die-with-parent).
    const child = spawn(command.file, command.args, {
      cwd: command.cwd,
      env: command.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    const channel = stdioChannel(child.stdout, child.stdin, { maxLineBytes: bounds.maxLineBytes, maxUnreadBytes: bounds.maxBufferedBytes });
    super(id, channel, logger, () => child.kill('SIGKILL'), { bounds });
    const stderrTail: string[] = [];
    child.stderr.on('data', (chunk: Buffer) => {
      stderrTail.push(chunk.toString('utf8'));
      if (stderrTail.length > STDERR_TAIL_CHUNKS) stderrTail.shift();
    });
    child.once('exit', (code, signal) => this.end(`runner exited (${signal ?? code}): ${stderrTail.join('').slice(-2000)}`));
    // A process that could not be started (no such binary) never exits: it ends here, or killing it would wait forever.
    child.once('error', (error) => {
      if (child.pid === undefined) this.end(`runner could not be started: ${error.message}`);
      else this.failReady(error);
    });
  }
}
