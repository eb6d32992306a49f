/**
 * Host binding, in one place: which destinations a vaulted value may be sent to. The API server validates
 * a secret's `allowed_hosts` with `hostPatternFault` (so nothing the proxy cannot read is ever stored) and
 * the egress proxy decides with `allowsDestination` whether a placeholder may become its value in a request.
 *
 * An entry is `[http://]host[:port]`, where host is a DNS name (`api.example.com`), a `*.` suffix wildcard
 * (`*.example.org`: one or more labels before `example.org`, never `example.org` itself), an IPv4 literal or
 * a bracketed IPv6 literal (`[2001:db8::1]`). Without a port any port matches. Without `http://` only HTTPS
 * requests match; `http://` lets plain HTTP match as well (HTTPS to the same host always may).
 *
 * Invariants:
 * - A string value (no entry) is unbound: substituted toward any destination, as the interface has it.
 * - A bound value is substituted only where one of its entries matches; elsewhere the request is refused.
 * - Hosts compare in their canonical form (lower case, no trailing dot), as the proxy canonicalises a
 *   request's destination (destination-policy.ts).
 */
import { isIP } from 'node:net';
import type { Destination } from './destination-policy.js';
import type { Scheme } from './http-messages.js';

/** The most entries a secret may be bound to. */
export const MAX_ALLOWED_HOSTS = 32;
/** The longest entry: a scheme, a 253-character name and a port. */
export const MAX_HOST_PATTERN_LENGTH = 300;

/** A value the writer bound to destinations. */
export interface BoundSecret {
  value: string;
  /** The entries as written (validated by `hostPatternFault`). */
  allowedHosts: readonly string[];
}

/** What a run has under an alias: a plain value (unbound) or a bound one. */
export type RunSecret = string | BoundSecret;

export const secretValue = (secret: RunSecret): string => (typeof secret === 'string' ? secret : secret.value);
export const allowedHostsOf = (secret: RunSecret): readonly string[] | null => (typeof secret === 'string' ? null : secret.allowedHosts);

interface HostPattern {
  plainHttp: boolean;
  /** Canonical host; for a wildcard, the suffix after `*.`. */
  host: string;
  wildcard: boolean;
  port: number | undefined;
}

const DNS_LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const DNS_NAME = new RegExp(`^(?=.{1,253}$)${DNS_LABEL}(?:\\.${DNS_LABEL})*$`);

/** Parses an entry, or answers why it is not one. */
function parseHostPattern(text: string): HostPattern | string {
  if (text.length > MAX_HOST_PATTERN_LENGTH) return `must be at most ${MAX_HOST_PATTERN_LENGTH} characters`;
  const lower = text.toLowerCase();
  const plainHttp = lower.startsWith('http://');
  const rest = plainHttp ? lower.slice('http://'.length) : lower.startsWith('https://') ? lower.slice('https://'.length) : lower;
  if (/[/?#@\s]/.test(rest)) return 'must be a host with an optional port and `http://` scheme: no path, query, user or spaces';
  const wildcard = rest.startsWith('*.');
  const authority = wildcard ? rest.slice(2) : rest;
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(authority);
  let host: string;
  let portText: string | undefined;
  if (bracketed) {
    if (isIP(bracketed[1]!) !== 6) return 'the bracketed host must be an IPv6 literal';
    host = bracketed[1]!;
    portText = bracketed[2];
  } else {
    if (isIP(authority) === 6) return 'an IPv6 literal must be bracketed: [2001:db8::1]';
    const match = /^([^:]+)(?::(\d{1,5}))?$/.exec(authority);
    if (!match) return 'must be host or host:port';
    host = match[1]!.endsWith('.') ? match[1]!.slice(0, -1) : match[1]!;
    portText = match[2];
    if (isIP(host) === 0 && !DNS_NAME.test(host)) return 'the host must be a DNS name, an IPv4 literal or a bracketed IPv6 literal';
  }
  if (wildcard && isIP(host) !== 0) return 'a `*.` wildcard must precede a DNS name';
  if (wildcard && host.includes('*')) return 'only one leading `*.` is allowed';
  const port = portText === undefined ? undefined : Number(portText);
  if (port !== undefined && (port < 1 || port > 65_535)) return 'the port must be between 1 and 65535';
  // Compared with the proxy's canonical destinations: the IPv6 literal as Node's URL writes it.
  const canonical = isIP(host) === 6 ? new URL(`http://[${host}]/`).hostname.slice(1, -1) : host;
  return { plainHttp, host: canonical, wildcard, port };
}

/** Why `text` is not a valid `allowed_hosts` entry, or undefined when it is. */
export function hostPatternFault(text: string): string | undefined {
  const parsed = parseHostPattern(text);
  return typeof parsed === 'string' ? parsed : undefined;
}

// Entries are few and repeat on every request of a run: parse each once.
const parsedPatterns = new Map<string, HostPattern | undefined>();
const MAX_PARSED_PATTERNS = 10_000;

function cachedPattern(text: string): HostPattern | undefined {
  if (parsedPatterns.has(text)) return parsedPatterns.get(text);
  const parsed = parseHostPattern(text);
  const pattern = typeof parsed === 'string' ? undefined : parsed;
  if (parsedPatterns.size >= MAX_PARSED_PATTERNS) parsedPatterns.clear();
  parsedPatterns.set(text, pattern);
  return pattern;
}

function matches(pattern: HostPattern, scheme: Scheme, destination: Destination): boolean {
  if (scheme === 'http' && !pattern.plainHttp) return false;
  if (pattern.port !== undefined && pattern.port !== destination.port) return false;
  return pattern.wildcard ? destination.host.endsWith(`.${pattern.host}`) : destination.host === pattern.host;
}

/** Whether `secret` may be sent over `scheme` to `destination`: unbound always; bound where an entry matches. */
export function allowsDestination(secret: RunSecret, scheme: Scheme, destination: Destination): boolean {
  if (typeof secret === 'string') return true;
  // An entry that does not parse (never stored by the API server) matches nothing: the safe side.
  return secret.allowedHosts.some((text) => {
    const pattern = cachedPattern(text);
    return pattern !== undefined && matches(pattern, scheme, destination);
  });
}
