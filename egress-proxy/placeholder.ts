/**
 * The placeholder grammar, in one place: `{{secret:ALIAS}}` is the only form in which a message, the agent
 * and a runner's environment refer to a vaulted value. The API server (which finds the placeholders a send
 * names and masks values back into them) and the egress proxy (which substitutes them on the way out and
 * masks on the way in) read and write placeholders through this module alone, so the two cannot disagree on
 * what is one.
 *
 * Invariant: a placeholder is exactly `{{secret:ALIAS}}` with ALIAS matching ^[A-Z][A-Z0-9_]{0,63}$; anything
 * else (lower case, too long, unterminated, spaced) is ordinary text and is never substituted.
 */

const ALIAS = '[A-Z][A-Z0-9_]{0,63}';
export const MAX_ALIAS_LENGTH = 64;
/** A whole string that is an alias. */
export const ALIAS_PATTERN = new RegExp(`^${ALIAS}$`);

export const PLACEHOLDER_PREFIX = '{{secret:';
export const PLACEHOLDER_SUFFIX = '}}';

export const placeholderFor = (alias: string): string => `${PLACEHOLDER_PREFIX}${alias}${PLACEHOLDER_SUFFIX}`;

// Global patterns stay private: only matchAll and replace use them, which never leave lastIndex behind.
const PLACEHOLDER_IN_TEXT = new RegExp(`\\{\\{secret:(${ALIAS})\\}\\}`, 'g');
// In a request target the braces and colon may arrive percent-encoded (WHATWG URL encodes `{` `}` in paths).
const PLACEHOLDER_IN_TARGET = new RegExp(`(?:\\{|%7[Bb]){2}secret(?::|%3[Aa])(${ALIAS})(?:\\}|%7[Dd]){2}`, 'g');

/** Every alias a text names as a placeholder, in order of appearance. */
export function placeholdersIn(text: string): string[] {
  return [...text.matchAll(PLACEHOLDER_IN_TEXT)].map((match) => match[1]!);
}

/** `text` with each placeholder replaced by what `replacement` answers for its alias. */
export function replacePlaceholders(text: string, replacement: (alias: string) => string): string {
  return text.replace(PLACEHOLDER_IN_TEXT, (_match, alias: string) => replacement(alias));
}

/** As replacePlaceholders, for a request target, where a placeholder's braces and colon may be percent-encoded. */
export function replacePlaceholdersInTarget(target: string, replacement: (alias: string) => string): string {
  return target.replace(PLACEHOLDER_IN_TARGET, (_match, alias: string) => replacement(alias));
}

// The alias grammar byte by byte, for scanning streamed bodies.
export const isAliasFirstByte = (byte: number): boolean => byte >= 0x41 && byte <= 0x5a;
export const isAliasByte = (byte: number): boolean => isAliasFirstByte(byte) || (byte >= 0x30 && byte <= 0x39) || byte === 0x5f;
