/**
 * What the kubernetes provider's tests need beside the cluster harness: a connector to the
 * controller suites' fixture runner (which answers a connection with whether its pod gave it a token
 * and closes), and a record of the sandbox states the provider reports, awaitable.
 */
import { EventEmitter } from 'node:events';
import { connect } from 'node:net';
import { pino } from 'pino';
import type { RunnerConnector } from '../../api-server/sandboxes/kubernetes/provider.js';
import type { Runner, TurnOutcome } from '../../api-server/sandboxes/runner.js';

export const quietLogger = pino({ level: process.env.PROVIDER_LOG_LEVEL ?? 'silent' });

export interface StateChange {
  conversation: string;
  warm: boolean;
  expiresAt: Date | null;
}

/** The states reported, in order; `until` resolves once one matches. */
export class StateLog {
  readonly changes: StateChange[] = [];
  private readonly events = new EventEmitter();

  record(change: StateChange): void {
    this.changes.push(change);
    this.events.emit('change');
  }

  until(predicate: (change: StateChange) => boolean, timeoutMs = 15_000): Promise<StateChange> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.changes.find(predicate);
        if (!found) return;
        done();
        resolve(found);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no such sandbox state within ${timeoutMs} ms: ${JSON.stringify(this.changes)}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.events.off('change', check);
      };
      this.events.on('change', check);
      check();
    });
  }
}

/**
 * Connects to the fixture runner at the Sandbox's endpoint and reads its greeting. The runner it
 * answers speaks no turns: a turn on it lasts until the runner is killed, and then ends `crashed`,
 * as a turn on a runner whose connection is gone does.
 */
export const greetingConnector: RunnerConnector = (endpoint) =>
  new Promise((resolve, reject) => {
    const socket = connect({ host: endpoint.host, port: endpoint.port });
    let greeting = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      greeting += chunk;
    });
    socket.once('error', reject);
    socket.once('end', () => {
      if (endpoint.token.length === 0) return reject(new Error('no token read from the Secret'));
      resolve(new GreetingRunner(endpoint.id, greeting.trim()));
    });
  });

class GreetingRunner implements Runner {
  private killed = false;
  private readonly turns = new Set<(outcome: TurnOutcome) => void>();
  readonly currentRunId = undefined;
  readonly currentRequestId = undefined;
  readonly sessionSkills = undefined;
  readonly position = 0;

  constructor(
    readonly id: string,
    readonly greeting: string,
  ) {}

  get alive(): boolean {
    return !this.killed;
  }

  bindSessionStore(): void {}

  offerSkills(): void {}

  async deliverSkills(): Promise<void> {}

  async exportWorkspace(): Promise<Buffer> {
    return Buffer.alloc(0);
  }

  async importWorkspace(): Promise<void> {}

  runTurn(): Promise<TurnOutcome> {
    if (this.killed) return Promise.resolve({ kind: 'crashed', error: 'runner is not running' });
    return new Promise((resolve) => this.turns.add(resolve));
  }

  continueTurn(): Promise<TurnOutcome> {
    return this.runTurn();
  }

  settle(): void {}

  settleAll(): void {}

  async kill(): Promise<void> {
    this.killed = true;
    for (const end of this.turns) end({ kind: 'crashed', error: 'runner connection closed' });
    this.turns.clear();
  }
}
