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
 * `message_end` has gone out.
 */
export class TurnLines {
  readonly reply = new ReplyBuilder();
  /** The agent's `result`, once it came. */
  terminal: StreamLine | undefined;
  /** The SDK session the agent's `init` event named. */
  sessionId: string | undefined;
  /** Settles once the filler has streamed and the lines held behind it went out (at once without a filler). */
  readonly fillerDone: Promise<void>;
  private held: StreamLine[] | undefined;
  private readonly agentMasker: EventMasker;

  constructor(
    private readonly stream: RunStream,
    private readonly masker: GrowingMasker,
    filler: FillerStream | undefined,
  ) {
    this.agentMasker = new EventMasker(masker);
    this.fillerDone = filler ? this.streamFiller(filler) : Promise.resolve();
  }

  /** A line of the turn, the agent's or the platform's: streamed, or held while the filler streams. */
  readonly emit = (line: StreamLine): void => {
    if (this.held) this.held.push(line);
    else this.stream.append(line);
  };

  /** One raw agent event: masked, added to the reply and emitted (the result kept as the terminal line). */
  agentEvent(raw: StreamLine): void {
    for (const event of this.agentMasker.push(raw)) {
      if (event.type === 'system' && event.subtype === 'init' && typeof event.session_id === 'string') {
        this.sessionId = event.session_id;
      }
      this.reply.add(event);
      if (event.type === 'result') this.terminal = event;
      else this.emit(event);
    }
  }

  private async streamFiller(filler: FillerStream): Promise<void> {
    const held: StreamLine[] = [];
    this.held = held;
    const fillerMasker = new EventMasker(this.masker);
    const text = await filler((line) => {
      for (const l of fillerMasker.push(line)) this.stream.append(l);
    });
    for (const l of fillerMasker.flush()) this.stream.append(l);
    this.reply.addLeadingText(this.masker.maskText(text));
    this.held = undefined;
    for (const line of held) this.stream.append(line);
  }
}
