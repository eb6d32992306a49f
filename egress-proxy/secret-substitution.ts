/**
 * Placeholder substitution (outbound) and value masking (inbound) for the egress proxy.
 *
 * Invariants:
 * - A placeholder is what placeholder.ts says it is; anything else is ordinary text and passes through unchanged.
 * - Substitution is one left-to-right pass: a substituted value is never rescanned, so a value that itself
 *   contains placeholder-like text goes out verbatim and cannot pull in another alias.
 * - A placeholder whose alias the run does not have is an error (MissingSecretError), never passed through:
 *   the caller aborts the request before the unresolved text reaches the upstream.
 * - Masking replaces every occurrence of any of the run's values (and of their percent-encoded and
 *   JSON-escaped forms) with the value's placeholder, choosing the earliest match and, at one position, the
 *   longest; it is one pass too, so a placeholder it writes is never masked again.
 * - Streams are never buffered whole: each transform holds back only the bytes that could still become a
 *   match once the next chunk arrives (at most one placeholder, 75 bytes, or the longest value less one), so
 *   splitting the input anywhere yields exactly the output of the unsplit input.
 *
 * Fail-safe direction: substitution goes placeholder → value, so a placeholder it does not see (a body with a
 * content-encoding, a non-text body, base64 around it) reaches the upstream as the useless placeholder and the
 * call fails; it can never leak a value. Masking goes value → placeholder, so there the safe side is to scan
 * more, not less: the proxy masks every response body it can decode, whatever its content type.
 */
import { Transform, type TransformCallback } from 'node:stream';
import {
  MAX_ALIAS_LENGTH,
  PLACEHOLDER_PREFIX,
  PLACEHOLDER_SUFFIX,
  isAliasByte,
  isAliasFirstByte,
  placeholderFor,
  replacePlaceholders,
  replacePlaceholdersInTarget,
} from './placeholder.js';

const PREFIX = Buffer.from(PLACEHOLDER_PREFIX, 'latin1');
const SUFFIX = Buffer.from(PLACEHOLDER_SUFFIX, 'latin1');

/** Alias → plaintext value, for one run. */
export type SecretValues = ReadonlyMap<string, string>;

export class MissingSecretError extends Error {
  constructor(readonly alias: string) {
    super(`no secret is vaulted under alias ${alias} for this run`);
    this.name = 'MissingSecretError';
  }
}

/** A value that cannot be written where its placeholder stands (a header value with a line break, say). */
export class SecretPlacementError extends Error {
  constructor(readonly alias: string, where: string) {
    super(`the value of ${alias} cannot be placed in ${where}`);
    this.name = 'SecretPlacementError';
  }
}

// ---------------------------------------------------------------------------------------------------------
// Strings: request target and header values (short, complete, so no streaming needed).

// What Node accepts in a header value (its own check, as a latin1 string).
const INVALID_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

function lookup(values: SecretValues, alias: string): string {
  const value = values.get(alias);
  if (value === undefined) throw new MissingSecretError(alias);
  return value;
}

/**
 * Substitutes placeholders in a request target (path and query). Values are percent-encoded, so a value with
 * `&`, `/` or spaces stays one query value or one path segment.
 */
export function substituteTarget(target: string, values: SecretValues): string {
  return replacePlaceholdersInTarget(target, (alias) => encodeURIComponent(lookup(values, alias)));
}

/**
 * Substitutes placeholders in a header value. Header strings are latin1 in Node (one char per byte), so the
 * value goes in as its UTF-8 bytes; a value Node would refuse in a header (CR, LF, NUL...) is an error rather
 * than a chance to inject a header.
 */
export function substituteHeaderValue(headerValue: string, values: SecretValues): string {
  return replacePlaceholders(headerValue, (alias) => {
    const bytes = Buffer.from(lookup(values, alias), 'utf8').toString('latin1');
    if (INVALID_HEADER_VALUE.test(bytes)) throw new SecretPlacementError(alias, 'a header');
    return bytes;
  });
}

// ---------------------------------------------------------------------------------------------------------
// Masking, compiled once per set of values.

interface MaskPair {
  value: Buffer;
  placeholder: Buffer;
}

/** A run's values prepared for masking: longest first, empty values dropped, one pair per distinct form. */
export interface Masker {
  readonly pairs: readonly MaskPair[];
  readonly maxValueLength: number;
  /** Masks a header value (a latin1 string of bytes, as Node hands headers over). */
  maskHeaderValue(headerValue: string): string;
}

export function compileMasker(values: SecretValues): Masker | undefined {
  const byValue = new Map<string, string>();
  // Sorted aliases make the choice among aliases sharing one value deterministic.
  for (const alias of [...values.keys()].sort()) {
    const value = values.get(alias)!;
    if (value.length === 0) continue;
    // Besides the value itself, the forms it most often comes back in: percent-encoded (as the proxy writes
    // it into a request target, which echo services reflect) and JSON-escaped.
    for (const form of [value, encodeURIComponent(value), JSON.stringify(value).slice(1, -1)]) {
      if (!byValue.has(form)) byValue.set(form, alias);
    }
  }
  if (byValue.size === 0) return undefined;
  const pairs = [...byValue]
    .map(([form, alias]) => ({ value: Buffer.from(form, 'utf8'), placeholder: Buffer.from(placeholderFor(alias)) }))
    .sort((a, b) => b.value.length - a.value.length);
  // Alternation tries alternatives in order, so longest-first gives longest-at-a-position.
  const pattern = new RegExp(pairs.map((p) => escapeRegExp(p.value.toString('latin1'))).join('|'), 'g');
  const placeholderOf = new Map(pairs.map((p) => [p.value.toString('latin1'), p.placeholder.toString('latin1')]));
  return {
    pairs,
    maxValueLength: pairs[0]!.value.length,
    maskHeaderValue: (headerValue) => headerValue.replace(pattern, (match) => placeholderOf.get(match)!),
  };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// ---------------------------------------------------------------------------------------------------------
// Byte scanning. Each scan takes the pending bytes and whether the stream has ended, and returns what can be
// emitted now and what must wait for the next chunk.

interface ScanResult {
  out: Buffer;
  rest: Buffer;
}

type PlaceholderAt = { kind: 'match'; alias: string; end: number } | { kind: 'partial' } | { kind: 'none' };

/** Reads the placeholder starting at `start` (where PREFIX has been found). */
function readPlaceholder(buf: Buffer, start: number): PlaceholderAt {
  const aliasStart = start + PREFIX.length;
  let i = aliasStart;
  while (i < buf.length && i - aliasStart < MAX_ALIAS_LENGTH && (i === aliasStart ? isAliasFirstByte(buf[i]!) : isAliasByte(buf[i]!))) i++;
  if (i >= buf.length) return { kind: 'partial' };
  if (i === aliasStart) return { kind: 'none' };
  for (let k = 0; k < SUFFIX.length; k++) {
    if (i + k >= buf.length) return { kind: 'partial' };
    if (buf[i + k] !== SUFFIX[k]) return { kind: 'none' };
  }
  return { kind: 'match', alias: buf.toString('latin1', aliasStart, i), end: i + SUFFIX.length };
}

/** Start of the longest suffix of `buf` (from `from` on) that is a proper prefix of PREFIX, or buf.length. */
function partialPrefixStart(buf: Buffer, from: number): number {
  for (let start = Math.max(from, buf.length - (PREFIX.length - 1)); start < buf.length; start++) {
    if (buf.subarray(start).equals(PREFIX.subarray(0, buf.length - start))) return start;
  }
  return buf.length;
}

export function scanSubstitute(
  buf: Buffer,
  values: SecretValues,
  final: boolean,
  encoded: Map<string, Buffer> = new Map(),
): ScanResult {
  const parts: Buffer[] = [];
  let emitted = 0;
  let searchFrom = 0;
  let holdFrom = buf.length;
  for (;;) {
    const start = buf.indexOf(PREFIX, searchFrom);
    if (start === -1) {
      if (!final) holdFrom = partialPrefixStart(buf, searchFrom);
      break;
    }
    const found = readPlaceholder(buf, start);
    if (found.kind === 'partial' && !final) {
      holdFrom = start;
      break;
    }
    if (found.kind !== 'match') {
      searchFrom = start + 1;
      continue;
    }
    let value = encoded.get(found.alias);
    if (value === undefined) {
      value = Buffer.from(lookup(values, found.alias), 'utf8');
      encoded.set(found.alias, value);
    }
    parts.push(buf.subarray(emitted, start), value);
    emitted = searchFrom = found.end;
  }
  parts.push(buf.subarray(emitted, holdFrom));
  // Copied, so the held bytes never alias a chunk buffer the stream may reuse.
  return { out: Buffer.concat(parts), rest: Buffer.from(buf.subarray(holdFrom)) };
}

/** Earliest position ≥ from where the rest of `buf` is a proper prefix of some value (could still complete). */
function partialValueStart(buf: Buffer, from: number, masker: Masker): number {
  for (let start = Math.max(from, buf.length - (masker.maxValueLength - 1)); start < buf.length; start++) {
    const tail = buf.subarray(start);
    for (const { value } of masker.pairs) {
      if (value.length > tail.length && value[0] === tail[0] && value.subarray(0, tail.length).equals(tail)) return start;
    }
  }
  return buf.length;
}

export function scanMask(buf: Buffer, masker: Masker, final: boolean): ScanResult {
  const parts: Buffer[] = [];
  let emitted = 0;
  // Next occurrence of each value at or after `emitted`; recomputed only once passed.
  const next = masker.pairs.map((p) => buf.indexOf(p.value));
  for (;;) {
    let best = -1;
    for (let i = 0; i < next.length; i++) {
      if (next[i]! !== -1 && next[i]! < emitted) next[i] = buf.indexOf(masker.pairs[i]!.value, emitted);
      // Strictly earlier only: pairs are longest first, so a tie keeps the longer value.
      if (next[i]! !== -1 && (best === -1 || next[i]! < next[best]!)) best = i;
    }
    // A value that might still complete and starts no later than this match would win over it: wait for it.
    const pending = final ? buf.length : partialValueStart(buf, emitted, masker);
    if (best === -1 || next[best]! >= pending) {
      parts.push(buf.subarray(emitted, pending));
      return { out: Buffer.concat(parts), rest: Buffer.from(buf.subarray(pending)) };
    }
    const at = next[best]!;
    parts.push(buf.subarray(emitted, at), masker.pairs[best]!.placeholder);
    emitted = at + masker.pairs[best]!.value.length;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Transforms.

function scanningTransform(scan: (buf: Buffer, final: boolean) => ScanResult): Transform {
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

/** Placeholders → the run's values; errors with MissingSecretError on an alias the run lacks. */
export function createSubstitutionTransform(values: SecretValues): Transform {
  const encoded = new Map<string, Buffer>();
  return scanningTransform((buf, final) => scanSubstitute(buf, values, final, encoded));
}

/** The run's values → their placeholders. */
export function createMaskingTransform(masker: Masker): Transform {
  return scanningTransform((buf, final) => scanMask(buf, masker, final));
}
