/**
 * Placeholder substitution for the egress proxy: a run's values in place of its placeholders on the way out.
 * (The way back in is masking, secret-masking.ts.)
 *
 * Invariants:
 * - A placeholder is what placeholder.ts says it is; anything else is ordinary text and passes through unchanged.
 * - Substitution is one left-to-right pass: a substituted value is never rescanned, so a value that itself
 *   contains placeholder-like text goes out verbatim and cannot pull in another alias.
 * - A placeholder whose alias the run does not have is an error (MissingSecretError), never passed through:
 *   the caller aborts the request before the unresolved text reaches the upstream.
 * - Streams are never buffered whole: the transform holds back only the bytes that could still become a
 *   placeholder once the next chunk arrives (at most one placeholder, 75 bytes), so splitting the input
 *   anywhere yields exactly the output of the unsplit input.
 *
 * Fail-safe direction: substitution goes placeholder → value, so a placeholder it does not see (a body with a
 * content-encoding, a non-text body, base64 around it) reaches the upstream as the useless placeholder and the
 * call fails; it can never leak a value.
 */
import type { Transform } from 'node:stream';
import {
  MAX_ALIAS_LENGTH,
  PLACEHOLDER_PREFIX,
  PLACEHOLDER_SUFFIX,
  isAliasByte,
  isAliasFirstByte,
  replacePlaceholders,
  replacePlaceholdersInTarget,
} from './placeholder.js';
import { scanningTransform, type ScanResult } from './scanning-transform.js';

const PREFIX = Buffer.from(PLACEHOLDER_PREFIX, 'latin1');
const SUFFIX = Buffer.from(PLACEHOLDER_SUFFIX, 'latin1');

/**
 * Alias → plaintext value, for one run's request: `get` answers undefined for an alias the run lacks and
 * throws SecretDestinationError for one it may not send where the request goes (a Map serves when unbound).
 */
export type SecretValues = Pick<ReadonlyMap<string, string>, 'get'>;

export class MissingSecretError extends Error {
  constructor(readonly alias: string) {
    super(`no secret is vaulted under alias ${alias} for this run`);
    this.name = 'MissingSecretError';
  }
}

/** A bound secret's placeholder in a request to a destination outside its hosts: nothing is forwarded. */
export class SecretDestinationError extends Error {
  constructor(
    readonly alias: string,
    /** The request's destination, `host[:port]`. */
    readonly destination: string,
  ) {
    super(`the secret ${alias} is not allowed to be sent to ${destination}`);
    this.name = 'SecretDestinationError';
  }
}

/** A value that cannot be written where its placeholder stands (a header value with a line break, say). */
export class SecretPlacementError extends Error {
  constructor(
    readonly alias: string,
    where: string,
  ) {
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
// Streamed bodies, as bytes (scanning-transform.ts says what a scan returns).

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

export function scanSubstitute(buf: Buffer, values: SecretValues, final: boolean, encoded: Map<string, Buffer> = new Map()): ScanResult {
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

/** Placeholders → the run's values; errors with MissingSecretError on an alias the run lacks. */
export function createSubstitutionTransform(values: SecretValues): Transform {
  const encoded = new Map<string, Buffer>();
  return scanningTransform((buf, final) => scanSubstitute(buf, values, final, encoded));
}
