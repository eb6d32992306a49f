export type Line = Record<string, any>;

/** Every line of an NDJSON body (pings included), parsed. */
export function parseNdjson(text: string): Line[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Line);
}

export const isPing = (line: Line) => line.event === 'ping';
export const withoutPings = (lines: Line[]) => lines.filter((line) => !isPing(line));
export const isTerminal = (line: Line) => line.type === 'result' || (line.object === 'platform.event' && line.type === 'error');

/** The text carried by the stream's text deltas, in order. */
export function deltaText(lines: Line[]): string {
  return lines
    .filter((l) => l.type === 'stream_event' && l.event?.type === 'content_block_delta' && l.event.delta?.type === 'text_delta')
    .map((l) => l.event.delta.text as string)
    .join('');
}

/**
 * Reads an NDJSON response line by line, so a test can stop part-way (a client that goes away).
 * `onLine` returning true stops reading and cancels the body.
 */
export async function readLines(response: Response, onLine?: (line: Line) => unknown): Promise<Line[]> {
  const lines: Line[] = [];
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let newline = buffered.indexOf('\n');
    while (newline >= 0) {
      const text = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (text.trim() !== '') {
        const line = JSON.parse(text) as Line;
        lines.push(line);
        if (onLine?.(line) === true) {
          await reader.cancel();
          return lines;
        }
      }
      newline = buffered.indexOf('\n');
    }
  }
  return lines;
}
