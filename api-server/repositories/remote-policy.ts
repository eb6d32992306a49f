/**
 * Which git remotes a repository may name: the deployment decides, not the tenant. A remote is
 * hostile input: pointed at the cluster's own services, the node's loopback or the cloud's metadata
 * endpoint, a sync (which runs git with a vaulted credential) becomes a probe of the inside.
 *
 * - `file://` only with ACIS_ALLOW_FILE_REPOS=1; `http://` and `git://` (unencrypted: a credential or
 *   the fetched skills can be read or changed on the way) only with ACIS_ALLOW_PLAIN_REPOS=1.
 * - A host that is, or resolves to, a loopback, link-local, private, reserved or metadata address is
 *   refused unless ACIS_REPOSITORY_ALLOW lists it (`host` or `host:port`, as ACIS_EGRESS_ALLOW);
 *   metadata endpoints are refused even then. The egress proxy's destination policy decides, so the
 *   two agree on what "private" means.
 *
 * Checked at registration (422) and again before every fetch (the sync fails), since a name may
 * resolve elsewhere later. At registration a name that does not resolve is let through (it may
 * before the first sync); before a fetch it fails the sync, and git is handed the addresses the check
 * vetted (`RemotePin`) rather than resolving the name again: a name answering one address to the
 * check and another to git (DNS rebinding) reaches only the first. Fail-safe direction: anything
 * unparsable is refused.
 */
import { isIP } from 'node:net';
import {
  type AllowList,
  canonicalHost,
  parseAllowList,
  type Resolver,
  systemResolver,
  vetDestination,
} from '../../egress-proxy/destination-policy.js';
import { classifyRepoUrl } from './repositories.schemas.js';

export interface RemotePolicy {
  allowFile: boolean;
  allowPlain: boolean;
  allow: AllowList;
  resolve: Resolver;
}

export interface RemoteSettings {
  allowFileRepos: boolean;
  allowPlainRepos: boolean;
  /** ACIS_REPOSITORY_ALLOW as written. */
  repositoryAllow: string | undefined;
}

export function remotePolicy(settings: RemoteSettings, resolve: Resolver = systemResolver): RemotePolicy {
  return {
    allowFile: settings.allowFileRepos,
    allowPlain: settings.allowPlainRepos,
    allow: parseAllowList(settings.repositoryAllow),
    resolve,
  };
}

const DEFAULT_PORTS: Record<string, number> = { 'https:': 443, 'http:': 80, 'ssh:': 22, 'git:': 9418 };

/** The host and port git will connect to, or undefined for a local (file://) remote or an unparsable one. */
export function remoteDestination(repoUrl: string): { host: string; port: number } | undefined {
  if (!repoUrl.includes('://')) {
    // scp-like user@host:path or user@[v6]:path (classifyRepoUrl vetted the shape): ssh on port 22.
    const rest = repoUrl.slice(repoUrl.indexOf('@') + 1);
    const host = canonicalHost(rest.startsWith('[') ? rest.slice(0, rest.indexOf(']') + 1) : rest.slice(0, rest.indexOf(':')));
    return host === undefined ? undefined : { host, port: 22 };
  }
  const url = new URL(repoUrl);
  const host = canonicalHost(url.hostname);
  const port = url.port === '' ? DEFAULT_PORTS[url.protocol] : Number(url.port);
  return host === undefined || port === undefined ? undefined : { host, port };
}

/** Where git must connect: the host the URL names and the addresses vetted for it. */
export interface RemotePin {
  host: string;
  port: number;
  addresses: string[];
}

/** The remote vetted for a fetch: refused with a reason, or allowed with the addresses git must use (none for a local remote or an address literal). */
export type FetchVerdict = { refusal: string } | { refusal?: undefined; pin: RemotePin | undefined };

/** Why the deployment refuses this remote at registration, or undefined when it may be registered. */
export async function remoteRefusal(repoUrl: string, policy: RemotePolicy): Promise<string | undefined> {
  const verdict = await vetRemote(repoUrl, policy);
  return verdict.kind === 'refused' ? verdict.reason : undefined;
}

/** The remote vetted right before a fetch: a name that resolves to nothing now is refused, not left to git's own lookup. */
export async function vetRemoteForFetch(repoUrl: string, policy: RemotePolicy): Promise<FetchVerdict> {
  const verdict = await vetRemote(repoUrl, policy);
  switch (verdict.kind) {
    case 'refused':
      return { refusal: verdict.reason };
    case 'unresolved':
      return { refusal: `host unreachable: ${verdict.host} does not resolve` };
    case 'allowed':
      return { pin: verdict.pin };
  }
}

type Vetted = { kind: 'refused'; reason: string } | { kind: 'unresolved'; host: string } | { kind: 'allowed'; pin: RemotePin | undefined };

async function vetRemote(repoUrl: string, policy: RemotePolicy): Promise<Vetted> {
  const refused = (reason: string): Vetted => ({ kind: 'refused', reason });
  const kind = classifyRepoUrl(repoUrl);
  if ('reason' in kind) return refused(`the repository URL ${kind.reason}`);
  if (kind.kind === 'file')
    return policy.allowFile ? { kind: 'allowed', pin: undefined } : refused('file:// repositories are not enabled on this deployment');
  if (/^(http|git):\/\//i.test(repoUrl) && !policy.allowPlain) {
    return refused('unencrypted http:// and git:// repositories are not enabled on this deployment; use https:// or ssh');
  }
  const destination = remoteDestination(repoUrl);
  if (!destination) return refused('the repository URL names no host this server can check');
  let unresolved = false;
  const verdict = await vetDestination(destination, policy.allow, async (host) => {
    const addresses = await policy.resolve(host).catch(() => []);
    unresolved = addresses.length === 0;
    return addresses;
  });
  if (unresolved) return { kind: 'unresolved', host: destination.host };
  if (!verdict.allowed) {
    return refused(`the repository's host is refused: ${verdict.reason} (a deployment lists the hosts it allows in ACIS_REPOSITORY_ALLOW)`);
  }
  const literal = isIP(destination.host) !== 0;
  return { kind: 'allowed', pin: literal ? undefined : { ...destination, addresses: verdict.addresses.map((a) => a.address) } };
}
