import type { HttpBindings } from '@hono/node-server';
import type { Context } from 'hono';

/**
 * How the service names itself (docs/operators/configuration.md "Configuration"): PUBLIC_BASE_URL
 * when set. Unset, the loopback alias the request came to (`127.0.0.1`, `localhost`, `[::1]` on
 * the port it arrived on), because that is the address the listening line printed and the one a
 * client compares the OAuth metadata against; any other Host gets the default
 * `http://localhost:${PORT}`, so a name a client chose is never echoed into links.
 */
export interface ServiceNaming {
  publicBaseUrl: string;
  publicBaseUrlSet: boolean;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** The origin of `host` (a Host header) when it is a loopback alias on `localPort`, else undefined. */
export function loopbackOrigin(host: string | undefined, localPort: number | undefined): string | undefined {
  if (!host || localPort === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(`http://${host}`);
  } catch {
    return undefined;
  }
  if (url.username || url.password || url.pathname !== '/' || url.search || url.hash) return undefined;
  if (!LOOPBACK.has(url.hostname.toLowerCase()) || (url.port || '80') !== String(localPort)) return undefined;
  return url.origin;
}

/** The base URL this request's answers name (see `ServiceNaming`). */
export function requestBaseUrl(c: Context, naming: ServiceNaming): string {
  if (naming.publicBaseUrlSet) return naming.publicBaseUrl;
  // A request whose body was refused may have lost its socket by the time its error is answered.
  const localPort = (c.env as Partial<HttpBindings> | undefined)?.incoming?.socket?.localPort;
  return loopbackOrigin(c.req.header('host'), localPort) ?? naming.publicBaseUrl;
}

/**
 * Whether `url` names the same service as `canonical` (`${PUBLIC_BASE_URL}` + a path): equal, or,
 * with PUBLIC_BASE_URL unset, the same path at another loopback alias of the same port. The
 * aliases are one resource: a token obtained at one is valid at the others.
 */
export function sameServiceUrl(url: string, canonical: string, naming: ServiceNaming): boolean {
  if (url === canonical) return true;
  if (naming.publicBaseUrlSet) return false;
  let given: URL;
  let own: URL;
  try {
    given = new URL(url);
    own = new URL(canonical);
  } catch {
    return false;
  }
  return (
    given.protocol === 'http:' &&
    LOOPBACK.has(given.hostname.toLowerCase()) &&
    given.port === own.port &&
    given.pathname === own.pathname &&
    !given.search &&
    !given.hash &&
    !given.username &&
    !given.password
  );
}
