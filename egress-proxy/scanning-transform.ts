/**
 * The streaming shell shared by substitution and masking: a scan takes the pending bytes and whether the
 * stream has ended, and returns what can be emitted now and what must wait for the next chunk. The transform
 * holds back only that rest, so splitting the input anywhere yields exactly the output of the unsplit input
 * (as long as the scan keeps that promise), and a scan's throw fails the stream.
 */
import { Transform, type TransformCallback } from 'node:stream';

export interface ScanResult {
  out: Buffer;
  rest: Buffer;
}

export type Scan = (buf: Buffer, final: boolean) => ScanResult;

export function scanningTransform(scan: Scan): Transform {
  let rest: Buffer = Buffer.alloc(0);
  const step = (buf: Buffer, final: boolean, callback: TransformCallback) => {
    let result: ScanResult;
    try {
      result = scan(buf, final);
    } catch (err) {
      callback(err as Error);
      return;
    }
    rest = result.rest;
    callback(null, result.out.length > 0 ? result.out : undefined);
  };
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      step(rest.length > 0 ? Buffer.concat([rest, chunk]) : chunk, false, callback);
    },
    flush(callback) {
      step(rest, true, callback);
    },
  });
}
