/**
 * The platform's model endpoint as the egress proxy sees it. Runners that reach the model through the
 * proxy (runner pods: no socket is shared with the API server) hold only the placeholder
 * `{{secret:ANTHROPIC_API_KEY}}`; requests to this endpoint, and to no other, get the platform's key.
 * Identity is scheme, host and port together, so the key never goes out in clear text to an https
 * endpoint's port, nor to another port of the same host.
 */
import { parseAuthority, type Destination } from './destination-policy.js';

/** The alias the platform's model key stands under in runners' environments. */
export const MODEL_KEY_ALIAS = 'ANTHROPIC_API_KEY';

export interface ModelEndpoint {
  scheme: 'http' | 'https';
  destination: Destination;
}

/** ANTHROPIC_BASE_URL as an endpoint; throws on anything but an http(s) URL with a host. */
export function parseModelEndpoint(baseUrl: string): ModelEndpoint {
  const url = new URL(baseUrl);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`model endpoint must be an http(s) URL: ${url.protocol}`);
  const scheme = url.protocol === 'https:' ? 'https' : 'http';
  const authority = parseAuthority(url.host);
  if (!authority) throw new Error('model endpoint has no valid host');
  return { scheme, destination: { host: authority.host, port: authority.port ?? (scheme === 'https' ? 443 : 80) } };
}

export function isModelEndpoint(endpoint: ModelEndpoint | undefined, scheme: 'http' | 'https', destination: Destination): boolean {
  return (
    endpoint !== undefined &&
    endpoint.scheme === scheme &&
    endpoint.destination.host === destination.host &&
    endpoint.destination.port === destination.port
  );
}
