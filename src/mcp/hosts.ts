/**
 * DNS-rebinding defence for /mcp (MCP transports "Security warning"). A web page whose name
 * an attacker re-points at 127.0.0.1 reaches this server with its own name in `Host` (and
 * `Origin`), so both are checked against the names this service is actually served under:
 *
 * - the host of PUBLIC_BASE_URL (`URL.host`: with the port unless it is the default one);
 * - every MCP_ALLOWED_HOSTS entry, matched exactly as `host` or `host:port` (a reverse proxy's
 *   public name, or a local port-forward);
 * - `localhost`, `127.0.0.1` and `[::1]` on the port this request actually arrived on.
 *
 * The SDK's own helpers compare hostnames only, port-agnostic; pinning the loopback names to
 * the bound port also refuses a page served by another local program on another port.
 */
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
/** Host and Origin answers remembered per policy (`createHostPolicy`). */
const MAX_REMEMBERED = 256;

export interface HostPolicy {
  /** Why the request must be refused, or undefined when its Host and Origin are acceptable. */
  refusal(host: string | undefined, origin: string | undefined, localPort: number | undefined): string | undefined;
}

function parseHost(value: string): URL | undefined {
  try {
    const url = new URL(`http://${value}`);
    // `http://a@b` or `http://a/b` would parse to another host: a Host header is a bare authority.
    if (url.username || url.password || url.pathname !== '/' || url.search || url.hash) return undefined;
    return url;
  } catch {
    return undefined;
  }
}

export function createHostPolicy(publicBaseUrl: string, extraHosts: readonly string[]): HostPolicy {
  const exact = new Set([new URL(publicBaseUrl).host.toLowerCase(), ...extraHosts.map((h) => h.toLowerCase())]);

  const decide = (host: string, scheme: 'http:' | 'https:', localPort: number | undefined): boolean => {
    const url = parseHost(host);
    if (!url) return false;
    if (exact.has(url.host.toLowerCase())) return true;
    const port = url.port || (scheme === 'https:' ? '443' : '80');
    return LOOPBACK.has(url.hostname.toLowerCase()) && localPort !== undefined && port === String(localPort);
  };
  // Every MCP request asks about the same one or two names, and parsing one as a URL was
  // about 0.9 % of an MCP round trip (docs/contributors/performance-history.md "Three costs every MCP request
  // paid"). The answer depends only on the three inputs, so it is remembered; the Host header
  // is the client's, so at most MAX_REMEMBERED answers are kept and the rest decided afresh.
  const remembered = new Map<string, boolean>();
  const hostAllowed = (host: string, scheme: 'http:' | 'https:', localPort: number | undefined): boolean => {
    const key = `${scheme}${localPort ?? ''} ${host}`;
    let allowed = remembered.get(key);
    if (allowed === undefined) {
      allowed = decide(host, scheme, localPort);
      if (remembered.size < MAX_REMEMBERED) remembered.set(key, allowed);
    }
    return allowed;
  };

  return {
    refusal(host, origin, localPort) {
      if (!host || !hostAllowed(host, 'http:', localPort)) return `Host ${JSON.stringify(host ?? '')} is not a name this service is served under.`;
      // Non-browser clients send no Origin; a browser always does, and it must name us too.
      if (origin === undefined || origin === '') return undefined;
      let url: URL;
      try {
        url = new URL(origin);
      } catch {
        return 'The Origin header is not a valid origin.';
      }
      if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !hostAllowed(url.host, url.protocol, localPort)) {
        return `Origin ${JSON.stringify(origin)} is not allowed.`;
      }
      return undefined;
    },
  };
}
