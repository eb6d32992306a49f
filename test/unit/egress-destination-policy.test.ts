import { describe, expect, it } from 'vitest';
import {
  deniedAddressReason,
  parseAllowList,
  parseAuthority,
  vetDestination,
  type Resolver,
} from '../../egress-proxy/destination-policy.js';

describe('deniedAddressReason(address)', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.0.1', 'private'],
    ['100.64.0.1', 'private'],
    ['fd12:3456::1', 'private'],
    ['169.254.1.1', 'link-local'],
    ['fe80::1', 'link-local'],
    ['224.0.0.251', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['169.254.169.254', 'cloud-metadata'],
    ['fd00:ec2::254', 'cloud-metadata'],
    ['168.63.129.16', 'cloud-metadata'],
    ['64:ff9b::a00:1', 'private'], // NAT64 of 10.0.0.1
    ['2002:7f00:1::', 'loopback'], // 6to4 of 127.0.0.1
  ])('%s is refused as %s', (address, reason) => {
    expect(deniedAddressReason(address)).toBe(reason);
  });

  it.each(['93.184.215.14', '2606:4700::6810:85e5', '172.32.0.1', '100.128.0.1', '64:ff9b::5db8:d70e'])('%s is public', (address) => {
    expect(deniedAddressReason(address)).toBeUndefined();
  });
});

describe('parseAllowList(ACIS_EGRESS_ALLOW)', () => {
  it('matches hosts on any port and host:port pairs on that port only, canonicalised', () => {
    const allow = parseAllowList(' Model-Stub.Local , 127.0.0.1:8443,[::1]:9000, 0x7f.0.0.2 ');
    expect(allow.has({ host: 'model-stub.local', port: 1 })).toBe(true);
    expect(allow.has({ host: '127.0.0.1', port: 8443 })).toBe(true);
    expect(allow.has({ host: '127.0.0.1', port: 8444 })).toBe(false);
    expect(allow.has({ host: '::1', port: 9000 })).toBe(true);
    expect(allow.has({ host: '127.0.0.2', port: 80 })).toBe(true);
    expect(allow.has({ host: 'localhost', port: 8443 })).toBe(false);
  });

  it('reports every malformed entry at once', () => {
    expect(() => parseAllowList('ok.example,bad host,x:99999,y:abc')).toThrow(/bad host, x:99999, y:abc/);
  });
});

describe('parseAuthority(text)', () => {
  it('reads host, port and IPv6 literals', () => {
    expect(parseAuthority('Example.com.:443')).toEqual({ host: 'example.com', port: 443 });
    expect(parseAuthority('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
    expect(parseAuthority('::1')).toEqual({ host: '::1', port: undefined });
    expect(parseAuthority('host:0')).toBeUndefined();
    expect(parseAuthority(':80')).toBeUndefined();
  });
});

describe('vetDestination(destination, allow, resolve)', () => {
  // A fixed table stands in for DNS: the names below do not exist anywhere.
  const table: Record<string, string[]> = {
    'public.test': ['93.184.215.14'],
    'straddles.test': ['93.184.215.14', '10.0.0.7'],
    'rebinds-to-metadata.test': ['169.254.169.254'],
  };
  const resolve: Resolver = async (host) => {
    const addresses = table[host];
    if (!addresses) throw new Error('ENOTFOUND');
    return addresses.map((address) => ({ address, family: 4 as const }));
  };
  const none = parseAllowList(undefined);

  it('allows a public name and returns the addresses to connect to', async () => {
    expect(await vetDestination({ host: 'public.test', port: 443 }, none, resolve)).toEqual({
      allowed: true,
      addresses: [{ address: '93.184.215.14', family: 4 }],
    });
  });

  it('refuses a name with any private address, unless listed', async () => {
    const refused = await vetDestination({ host: 'straddles.test', port: 443 }, none, resolve);
    expect(refused).toEqual({ allowed: false, reason: 'straddles.test (10.0.0.7) is a private address' });
    const listed = await vetDestination({ host: 'straddles.test', port: 443 }, parseAllowList('straddles.test:443'), resolve);
    expect(listed.allowed).toBe(true);
  });

  it('refuses metadata endpoints by name and by address even when listed', async () => {
    const allowAll = parseAllowList('metadata.google.internal,rebinds-to-metadata.test,169.254.169.254');
    for (const host of ['metadata.google.internal', 'rebinds-to-metadata.test', '169.254.169.254']) {
      expect((await vetDestination({ host, port: 80 }, allowAll, resolve)).allowed).toBe(false);
    }
  });

  it('refuses a name that does not resolve', async () => {
    expect(await vetDestination({ host: 'nowhere.test', port: 80 }, none, resolve)).toEqual({
      allowed: false,
      reason: 'nowhere.test does not resolve',
    });
  });
});
