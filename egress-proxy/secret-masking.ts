/**
 * The one masker: a run's values back into their placeholders, wherever they turn up. The egress proxy masks
 * what flows back from upstream (header values, streamed bodies); the API server masks the agent's events,
 * its reply and its stored transcript. Both use this module, so a value one of them catches the other
 * catches too.
 *
 * Invariants:
 * - A value is caught in each form it is known to come back in: as it is, percent-encoded
 *   (encodeURIComponent: as the proxy writes it into a request target, which echo services reflect),
 *   JSON-escaped (inside JSON text: a tool's input, a JSON body quoted in a tool result), and, for a value of
 *   at least MIN_ENCODED_VALUE_BYTES, base64 (standard and URL-safe alphabets, padded or not, at each of the
 *   three byte offsets it may start at inside a longer encoded text: the characters that depend on the value
 *   alone), hex (lower and upper case) and reversed. Anything else (a value split across lines, compressed,
 *   encrypted, transformed by arbitrary code) is not recognised: binding is the defence against that.
 * - Every occurrence of a form becomes its value's placeholder, choosing the earliest match and, at one
 *   position, the longest. It is one pass, so a placeholder it writes is never masked again.
 * - A form shared by several aliases goes to the first of them in sort order, whatever order they came in;
 *   empty values are never masked.
 * - Streams are never buffered whole: the masking transform holds back only the bytes that could still
 *   become a form once the next chunk arrives (the longest form less one), so splitting the input anywhere
 *   yields exactly the output of the unsplit input.
 *
 * Fail-safe direction: masking goes value → placeholder, so the safe side is to scan more, not less: a form
 * wrongly caught costs a placeholder in the text, a form missed leaks a value.
 */
import type { Transform } from 'node:stream';
import { placeholderFor } from './placeholder.js';
import { scanningTransform, type ScanResult } from './scanning-transform.js';

interface MaskPair {
  /** One form of a value, as text and as UTF-8 bytes. */
  form: string;
  value: Buffer;
  placeholder: Buffer;
}

export interface Masker {
  /** Every form to mask with its placeholder, longest first: one pair per distinct form. */
  readonly pairs: readonly MaskPair[];
  /** The longest form's length in bytes; 0 when there is nothing to mask. */
  readonly maxValueLength: number;
  /** True when there is nothing to mask (no value, or only empty ones). */
  readonly empty: boolean;
  /** The text with every form replaced by its placeholder. */
  maskText(text: string): string;
  /** As maskText, for a header value (a latin1 string of bytes, as Node hands headers over). */
  maskHeaderValue(headerValue: string): string;
  /** A copy of a JSON value with every string (keys included) masked; the value itself when nothing matched. */
  maskValue<T>(value: T): T;
  /**
   * The length of the longest tail of `text` that is the beginning of a form (so the rest of it may follow in
   * the next chunk); 0 when none.
   */
  pendingLength(text: string): number;
}

/** The masker of `secrets` (alias, value); an alias may come more than once, with each value it had. */
export function createMasker(secrets: Iterable<readonly [alias: string, value: string]>): Masker {
  const pairs = maskPairs(secrets);
  const forms = pairs.map((pair) => pair.form);
  const empty = pairs.length === 0;
  const maskText = onePassReplacer(new Map(pairs.map((pair) => [pair.form, pair.placeholder.toString('utf8')])));
  return {
    pairs,
    maxValueLength: pairs[0]?.value.length ?? 0,
    empty,
    maskText,
    // Header strings are latin1 in Node (one char per byte): the forms' UTF-8 bytes, spelled the same way.
    maskHeaderValue: onePassReplacer(new Map(pairs.map((pair) => [pair.value.toString('latin1'), pair.placeholder.toString('latin1')]))),
    maskValue: <T>(value: T): T => (empty ? value : maskJson(value, maskText)),
    pendingLength: (text) => pendingLength(text, forms),
  };
}

/** The masker of one run's values, for the proxy; undefined when there is nothing to mask. */
export function compileMasker(values: ReadonlyMap<string, string>): Masker | undefined {
  const masker = createMasker(values);
  return masker.empty ? undefined : masker;
}

/** Each form of each non-empty value with its alias's placeholder, longest first. */
function maskPairs(secrets: Iterable<readonly [alias: string, value: string]>): MaskPair[] {
  const aliasOfForm = new Map<string, string>();
  // Sorted aliases make the choice among aliases sharing one form deterministic.
  const sorted = [...secrets].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [alias, value] of sorted) {
    if (value.length === 0) continue;
    for (const form of formsOf(value)) {
      if (!aliasOfForm.has(form)) aliasOfForm.set(form, alias);
    }
  }
  return [...aliasOfForm]
    .map(([form, alias]) => ({ form, value: Buffer.from(form, 'utf8'), placeholder: Buffer.from(placeholderFor(alias)) }))
    .sort((a, b) => b.value.length - a.value.length);
}

/**
 * Below this many UTF-8 bytes a value is masked only as it is, percent-encoded and JSON-escaped: the
 * encoded forms of a shorter value are short enough to turn up in unrelated base64 or hex text.
 */
export const MIN_ENCODED_VALUE_BYTES = 6;

/** Every form of `value` the masker looks for (the text forms, then the encoded ones). */
export function formsOf(value: string): string[] {
  const forms = [value, encodeURIComponent(value), JSON.stringify(value).slice(1, -1)];
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length < MIN_ENCODED_VALUE_BYTES) return forms;
  const hex = bytes.toString('hex');
  forms.push(hex, hex.toUpperCase(), [...value].reverse().join(''));
  for (const core of base64Cores(bytes)) forms.push(core, core.replace(/\+/g, '-').replace(/\//g, '_'));
  return forms;
}

/**
 * The base64 text of `bytes` at each byte offset (0, 1, 2) inside a longer encoded text: the characters whose
 * six bits all come from `bytes`, which read the same whatever precedes or follows (padding included).
 */
function base64Cores(bytes: Buffer): string[] {
  return [0, 1, 2].map((offset) => {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    return encoded.slice(Math.ceil((8 * offset) / 6), Math.floor((8 * (offset + bytes.length)) / 6));
  });
}

/**
 * Replaces every occurrence of a key of `replacements` (keys longest first) by its value, in one pass. The
 * pattern is compiled on first use: the proxy never masks text, the API server never masks header values.
 */
function onePassReplacer(replacements: ReadonlyMap<string, string>): (text: string) => string {
  let pattern: RegExp | undefined;
  return (text) => {
    if (replacements.size === 0) return text;
    // Alternation tries alternatives in order, so longest-first gives longest-at-a-position.
    pattern ??= new RegExp([...replacements.keys()].map(escapeRegExp).join('|'), 'g');
    return text.replace(pattern, (found) => replacements.get(found)!);
  };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function maskJson<T>(value: T, maskText: (text: string) => string): T {
  if (typeof value === 'string') return maskText(value) as T;
  if (Array.isArray(value)) {
    const items = value.map((item: unknown) => maskJson(item, maskText));
    return items.some((item, i) => item !== value[i]) ? (items as T) : value;
  }
  if (value !== null && typeof value === 'object') {
    let changed = false;
    const entries = Object.entries(value).map(([key, item]) => {
      const masked = [maskText(key), maskJson(item, maskText)] as const;
      if (masked[0] !== key || masked[1] !== item) changed = true;
      return masked;
    });
    return changed ? (Object.fromEntries(entries) as T) : value;
  }
  return value;
}

function pendingLength(text: string, forms: readonly string[]): number {
  let longest = 0;
  for (const form of forms) {
    // Only a tail shorter than the whole form can still grow into it.
    for (let i = Math.max(0, text.length - form.length + 1); i < text.length - longest; i++) {
      if (text.charCodeAt(i) === form.charCodeAt(0) && form.startsWith(text.slice(i))) {
        longest = text.length - i;
        break;
      }
    }
  }
  return longest;
}

// ---------------------------------------------------------------------------------------------------------
// Streamed bodies, as bytes.

/** Earliest position ≥ from where the rest of `buf` is a proper prefix of some form (could still complete). */
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
  // Next occurrence of each form at or after `emitted`; recomputed only once passed.
  const next = masker.pairs.map((p) => buf.indexOf(p.value));
  for (;;) {
    let best = -1;
    for (let i = 0; i < next.length; i++) {
      if (next[i]! !== -1 && next[i]! < emitted) next[i] = buf.indexOf(masker.pairs[i]!.value, emitted);
      // Strictly earlier only: pairs are longest first, so a tie keeps the longer form.
      if (next[i]! !== -1 && (best === -1 || next[i]! < next[best]!)) best = i;
    }
    // A form that might still complete and starts no later than this match would win over it: wait for it.
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

/** The run's values → their placeholders, in a stream of bytes. */
export function createMaskingTransform(masker: Masker): Transform {
  return scanningTransform((buf, final) => scanMask(buf, masker, final));
}
