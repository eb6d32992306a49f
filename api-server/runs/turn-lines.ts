import { EventMasker, type GrowingMasker } from '../secrets/event-masking.js';
import { ReplyBuilder } from './reply.js';
import type { RunStream, StreamLine } from './run-stream.js';

/** Streams the filler's acknowledgement through `onLine`; resolves with its text. */
export type FillerStream = (onLine: (line: StreamLine) => void) => Promise<string>;

/**
 * The lines of one turn on their way to the run's stream. Every agent event is masked before
 * anything else sees it: the stream, the stored reply, the result. While the filler streams, the
 * turn's own lines (the agent's and the platform's) wait, so its acknowledgement comes first. The
 * agent's `result` is the terminal line: it is kept back here until the reply is stored and
 * `message_end` has gone out. Each line goes to the stream with the runner line it came from
 * (`origin`, read when the runner line arrives): the filler's come from none.
 */
export class TurnLines {
  readonly reply = new ReplyBuilder();
  /** The agent's `result`, once it came, and the runner line it came from. */
  terminal: StreamLine | undefined;
  terminalOrigin: number | undefined;
  /** The SDK session the agent's `init` event named. */
  sessionId: string | undefined;
  /** Settles once the filler has streamed and the lines held behind it went out (at once without a filler). */
  readonly fillerDone: Promise<void>;
  private held: Array<[line: StreamLine, origin: number | undefined]> | undefined;
  private readonly agentMasker: EventMasker;

  constructor(
    private readonly stream: RunStream,
    private readonly masker: GrowingMasker,
    filler: FillerStream | undefined,
    /** The runner line being delivered now, if the runner's channel numbers them. */
    private readonly origin: () => number | undefined = () => undefined,
  ) {
    this.agentMasker = new EventMasker(masker);
    this.fillerDone = filler ? this.streamFiller(filler) : Promise.resolve();
  }

  /**
   * The lines a node that died had stored of this turn (a run taken over): the reply and the session
   * carry on from them. The filler's acknowledgement is the text streamed before the agent's first event.
   */
  continueFrom(stored: StreamLine[]): void {
    let leading = '';
    let agentBegan = false;
    for (const line of stored) {
      if (line.type === 'system') agentBegan = true;
      if (!agentBegan) leading += fillerText(line);
      if (line.type === 'system' && line.subtype === 'init' && typeof line.session_id === 'string') this.sessionId = line.session_id;
      this.reply.add(line);
    }
    this.reply.addLeadingText(leading);
  }

  /** A line of the turn, the agent's or the platform's: streamed, or held while the filler streams. */
  readonly emit = (line: StreamLine): void => this.emitFrom(line, this.origin());

  /** One raw agent event: masked, added to the reply and emitted (the result kept as the terminal line). */
  agentEvent(raw: StreamLine): void {
    const origin = this.origin();
    for (const event of this.agentMasker.push(raw)) {
      if (event.type === 'system' && event.subtype === 'init' && typeof event.session_id === 'string') {
        this.sessionId = event.session_id;
      }
      this.reply.add(event);
      if (event.type === 'result') {
        this.terminal = event;
        this.terminalOrigin = origin;
      } else this.emitFrom(event, origin);
    }
  }

  private emitFrom(line: StreamLine, origin: number | undefined): void {
    if (this.held) this.held.push([line, origin]);
    else this.stream.append(line, origin);
  }

  private async streamFiller(filler: FillerStream): Promise<void> {
    const held: Array<[StreamLine, number | undefined]> = [];
    this.held = held;
    const fillerMasker = new EventMasker(this.masker);
    const text = await filler((line) => {
      for (const l of fillerMasker.push(line)) this.stream.append(l);
    });
    for (const l of fillerMasker.flush()) this.stream.append(l);
    this.reply.addLeadingText(this.masker.maskText(text));
    this.held = undefined;
    for (const [line, origin] of held) this.stream.append(line, origin);
  }
}

/** The text of a streamed text delta line (the filler's lines are only these); '' for any other line. */
function fillerText(line: StreamLine): string {
  const event =
    line.type === 'stream_event' ? (line.event as { type?: unknown; delta?: { type?: unknown; text?: unknown } } | undefined) : undefined;
  return event?.type === 'content_block_delta' && event.delta?.type === 'text_delta' && typeof event.delta.text === 'string'
    ? event.delta.text
    : '';
}
