/**
 * Splits a byte stream into newline-terminated lines. A line longer than `maxLineLength` (counted in
 * string characters) is an overflow: the peer is broken or hostile, and the caller closes the
 * connection rather than buffer without bound.
 */
import { StringDecoder } from 'node:string_decoder';

export class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  /** The unterminated tail so far, in pieces (joined once its newline arrives). */
  private partial: string[] = [];
  private partialLength = 0;

  constructor(
    public maxLineLength: number,
    private readonly onLine: (line: string) => void,
    private readonly onOverflow: () => void,
  ) {}

  push(chunk: Buffer): void {
    const text = this.decoder.write(chunk);
    let start = 0;
    for (let newline = text.indexOf('\n'); newline !== -1; newline = text.indexOf('\n', start)) {
      let line = text.slice(start, newline);
      start = newline + 1;
      if (this.partial.length > 0) {
        line = this.partial.join('') + line;
        this.partial = [];
        this.partialLength = 0;
      }
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line.length > this.maxLineLength) {
        this.onOverflow();
        return;
      }
      if (line.length > 0) this.onLine(line);
    }
    if (start < text.length) {
      this.partial.push(text.slice(start));
      this.partialLength += text.length - start;
      if (this.partialLength > this.maxLineLength) this.onOverflow();
    }
  }
}
