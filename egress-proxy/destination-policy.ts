/**
 * Where the egress proxy may connect.
 *
 * Invariants:
 * - The decision is taken on the addresses a name RESOLVES to, once; the proxy then connects only to those
 *   vetted addresses (see `vettedLookup`), so a name that re-resolves to 127.0.0.1 after the check (DNS
 *   rebinding) cannot be reached.
 * - Loopback, link-local, private (RFC 1918, ULA, CGNAT), unspecified, multicast and reserved addresses are
 *   refused, including IPv4 addresses carried inside IPv6 (mapped, NAT64, 6to4). A name is refused if ANY of
 *   its addresses is: a name that straddles public and private space is not trusted with either.
 * - ACIS_EGRESS_ALLOW lifts that refusal for the hosts (any port) or host:port pairs it lists, matched on the
 *   destination as the client named it (canonicalised), never on the Host header.
 * - Cloud metadata endpoints are refused even when listed: no agent call needs the node's cloud credentials,
 *   and an allow entry for a private range must not open them by accident.
 *
 * Fail-safe direction: anything the policy cannot classify (an unparsable host, a failed resolution) is
 * refused, not forwarded.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

export interface Destination {
  /** Canonical host: lower case, no trailing dot, IPv6 without brackets. */
  host: string;
  port: number;
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type Verdict = { allowed: true; addresses: ResolvedAddress[] } | { allowed: false; reason: string };

export interface AllowList {
  has(destination: Destination): boolean;
}

const METADATA_HOSTS = new Set(['metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data', 'instance-data.ec2.internal']);
const METADATA_ADDRESSES = new Set([
  '169.254.169.254', // AWS, GCP, Azure, OpenStack, Oracle...
  '169.254.170.2', // AWS ECS task credentials
  'fd00:ec2::254', // AWS IMDS over IPv6
  '100.100.100.200', // Alibaba Cloud
  '168.63.129.16', // Azure WireServer (a public address, so no range below covers it)
]);

function blockList(ranges: Array<[string, number, 'ipv4' | 'ipv6']>): BlockList {
  const list = new BlockList();
  for (const [network, prefix, type] of ranges) list.addSubnet(network, prefix, type);
  return list;
}

// Checked in order; the first hit names the reason. BlockList also matches IPv4-mapped IPv6 against the
// IPv4 rules.
const DENIED_RANGES: Array<[string, BlockList]> = [
  [
    'unspecified',
    blockList([
      ['0.0.0.0', 8, 'ipv4'],
      ['::', 128, 'ipv6'],
    ]),
  ],
  [
    'loopback',
    blockList([
      ['127.0.0.0', 8, 'ipv4'],
      ['::1', 128, 'ipv6'],
    ]),
  ],
  [
    'link-local',
    blockList([
      ['169.254.0.0', 16, 'ipv4'],
      ['fe80::', 10, 'ipv6'],
    ]),
  ],
  [
    'private',
    blockList([
      ['10.0.0.0', 8, 'ipv4'],
      ['172.16.0.0', 12, 'ipv4'],
      ['192.168.0.0', 16, 'ipv4'],
      ['100.64.0.0', 10, 'ipv4'], // CGNAT
      ['fc00::', 7, 'ipv6'], // ULA
      ['fec0::', 10, 'ipv6'], // site-local (deprecated, still routable inside some networks)
    ]),
  ],
  [
    'multicast',
    blockList([
      ['224.0.0.0', 4, 'ipv4'],
      ['ff00::', 8, 'ipv6'],
    ]),
  ],
  [
    'reserved',
    blockList([
      ['192.0.0.0', 24, 'ipv4'],
      ['198.18.0.0', 15, 'ipv4'],
      ['240.0.0.0', 4, 'ipv4'], // includes 255.255.255.255
      ['::', 96, 'ipv6'], // IPv4-compatible (deprecated)
      ['100::', 64, 'ipv6'], // discard-only
    ]),
  ],
];

/** Canonicalises a host as a URL parser would (`0x7f.1` → `127.0.0.1`, `Example.COM.` → `example.com`). */
export function canonicalHost(raw: string): string | undefined {
  const bare = raw.startsWith('[') && raw.endsWith(']') ? raw.slice(1, -1) : raw;
  try {
    const host = new URL(`http://${isIP(bare) === 6 ? `[${bare}]` : bare}/`).hostname;
    const unbracketed = host.startsWith('[') ? host.slice(1, -1) : host;
    return unbracketed.endsWith('.') ? unbracketed.slice(0, -1) : unbracketed;
  } catch {
    return undefined;
  }
}

/** Parses `host`, `host:port`, `[v6]`, `[v6]:port` (a bare IPv6 literal has no port). */
export function parseAuthority(text: string): { host: string; port: number | undefined } | undefined {
  let host: string;
  let portText: string | undefined;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  if (bracketed) {
    host = bracketed[1]!;
    portText = bracketed[2];
  } else if (isIP(text) === 6) {
    host = text;
  } else {
    const colon = text.lastIndexOf(':');
    host = colon === -1 ? text : text.slice(0, colon);
    portText = colon === -1 ? undefined : text.slice(colon + 1);
    if (portText !== undefined && !/^\d+$/.test(portText)) return undefined;
  }
  const port = portText === undefined ? undefined : Number(portText);
  if (port !== undefined && (port < 1 || port > 65535)) return undefined;
  const canonical = host === '' ? undefined : canonicalHost(host);
  return canonical === undefined ? undefined : { host: canonical, port };
}

/**
 * Parses ACIS_EGRESS_ALLOW (comma-separated `host` or `host:port`). Throws listing every bad entry, so an
 * operator fixes the variable in one go.
 */
export function parseAllowList(text: string | undefined): AllowList {
  const hosts = new Set<string>();
  const hostPorts = new Set<string>();
  const bad: string[] = [];
  for (const entry of (text ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const parsed = parseAuthority(entry);
    if (!parsed) bad.push(entry);
    else if (parsed.port === undefined) hosts.add(parsed.host);
    else hostPorts.add(`${parsed.host} ${parsed.port}`);
  }
  if (bad.length > 0) throw new Error(`ACIS_EGRESS_ALLOW: not a host or host:port: ${bad.join(', ')}`);
  return { has: (d) => hosts.has(d.host) || hostPorts.has(`${d.host} ${d.port}`) };
}

/** Why an address is refused, or undefined when it is public. */
export function deniedAddressReason(address: string): string | undefined {
  const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  const normalized = type === 'ipv6' ? (canonicalHost(address) ?? address) : address;
  if (METADATA_ADDRESSES.has(normalized)) return 'cloud-metadata';
  for (const [reason, list] of DENIED_RANGES) if (list.check(address, type)) return reason;
  if (type === 'ipv6') {
    const embedded = embeddedIpv4(address);
    if (embedded !== undefined) return deniedAddressReason(embedded);
  }
  return undefined;
}

/** The IPv4 address inside a NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address. */
function embeddedIpv4(address: string): string | undefined {
  const words = ipv6Words(address);
  if (!words) return undefined;
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  if (words[0] === 0x64 && words[1] === 0xff9b && words.slice(2, 6).every((w) => w === 0)) return v4(words[6]!, words[7]!);
  if (words[0] === 0x2002) return v4(words[1]!, words[2]!);
  return undefined;
}

function ipv6Words(address: string): number[] | undefined {
  const canonical = canonicalHost(address); // the URL parser rewrites a dotted tail into hex words
  if (canonical === undefined || isIP(canonical) !== 6) return undefined;
  const [head = '', tail] = canonical.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((w) => parseInt(w, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

export type Resolver = (host: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = async (host) =>
  (await dnsLookup(host, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));

/** Resolves the destination once and decides. */
export async function vetDestination(destination: Destination, allow: AllowList, resolve: Resolver): Promise<Verdict> {
  if (METADATA_HOSTS.has(destination.host)) return { allowed: false, reason: `${destination.host} is a cloud metadata endpoint` };
  let addresses: ResolvedAddress[];
  const literal = isIP(destination.host);
  if (literal !== 0) {
    addresses = [{ address: destination.host, family: literal === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await resolve(destination.host);
    } catch {
      return { allowed: false, reason: `${destination.host} does not resolve` };
    }
    if (addresses.length === 0) return { allowed: false, reason: `${destination.host} does not resolve` };
  }
  const listed = allow.has(destination);
  for (const { address } of addresses) {
    const reason = deniedAddressReason(address);
    if (reason === 'cloud-metadata' || (reason !== undefined && !listed)) {
      const named = literal !== 0 ? address : `${destination.host} (${address})`;
      return { allowed: false, reason: `${named} is a ${reason} address` };
    }
  }
  return { allowed: true, addresses };
}

/**
 * A `lookup` for http(s).request that answers with the vetted addresses only, so the connection goes where the
 * policy looked and TLS still verifies (and sends SNI for) the name.
 */
export function vettedLookup(addresses: readonly ResolvedAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all)
      callback(
        null,
        addresses.map((a) => ({ address: a.address, family: a.family })),
      );
    else callback(null, addresses[0]!.address, addresses[0]!.family);
  };
}
