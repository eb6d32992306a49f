/**
 * Splits a byte stream into newline-terminated lines. A line longer than `maxLineBytes` (UTF-8 bytes,
 * without its newline) is an overflow: the peer is broken or hostile, and the caller closes the
 * connection rather than buffer without bound. Lines are cut on the bytes and decoded whole, so a
 * multi-byte character split across chunks survives (a newline byte never occurs inside one).
 */
export class LineSplitter {
  /** The unterminated tail so far, in pieces (joined once its newline arrives). */
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private overflowed = false;

  constructor(
    public maxLineBytes: number,
    private readonly onLine: (line: string) => void,
    private readonly onOverflow: () => void,
  ) {}

  push(chunk: Buffer): void {
    if (this.overflowed) return;
    let start = 0;
    for (let newline = chunk.indexOf(10); newline !== -1; newline = chunk.indexOf(10, start)) {
      let bytes = chunk.subarray(start, newline);
      start = newline + 1;
      if (this.partial.length > 0) {
        bytes = Buffer.concat([...this.partial, bytes]);
        this.partial = [];
        this.partialBytes = 0;
      }
      if (bytes.length > 0 && bytes[bytes.length - 1] === 13) bytes = bytes.subarray(0, -1);
      if (bytes.length > this.maxLineBytes) {
        this.overflow();
        return;
      }
      if (bytes.length > 0) this.onLine(bytes.toString('utf8'));
    }
    if (start < chunk.length) {
      this.partialBytes += chunk.length - start;
      if (this.partialBytes > this.maxLineBytes) {
        this.overflow();
        return;
      }
      // A copy: the tail must not pin the whole chunk (up to 64 KiB) for a few bytes.
      this.partial.push(Buffer.from(chunk.subarray(start)));
    }
  }

  private overflow(): void {
    this.overflowed = true;
    this.partial = [];
    this.partialBytes = 0;
    this.onOverflow();
  }
}
