import http from 'node:http';
import https from 'node:https';
import type { PinnedAddress } from './ssrf.js';
import type { PostOutcome, PrivateHostAllowance, WebhookTransport } from '../domain/webhook-transport.js';
import { oneLine } from '../domain/errors.js';
import { BlockedAddressError, pinnedLookup, privateHosts, resolveAllowedAddress } from './ssrf.js';

/**
 * Sends webhooks (docs/owners/webhooks.md) through the SSRF guard OAuth metadata fetching uses
 * (src/http/ssrf.ts): HTTPS only, public addresses only, checked when a webhook is registered
 * and again on every attempt (DNS may have changed since), the connection pinned to the
 * checked address. `allowPrivate` (WEBHOOK_ALLOW_PRIVATE_HOSTS) admits the private hosts
 * an operator lists, over http too. `allowLoopback` is the test-only OAUTH_CIMD_ALLOW_LOOPBACK:
 * it admits loopback addresses, and http to them. No redirects are followed: a 3xx is a failed
 * attempt.
 */
export function createWebhookTransport(options: { allowLoopback: boolean; allowPrivate?: PrivateHostAllowance }): WebhookTransport {
  const allowed = privateHosts(options.allowPrivate ?? { names: [], ranges: [] });
  const schemeAllowed = (url: URL, listed: boolean) =>
    url.protocol === 'https:' || (url.protocol === 'http:' && (listed || (options.allowLoopback && loopbackHost(url))));
  const HTTPS_ONLY = 'webhooks are sent over https only';

  /** The address to connect to, or why not; the scheme is judged once the host is known to be listed or not. */
  async function check(url: URL, signal?: AbortSignal): Promise<PinnedAddress | BlockedAddressError> {
    // Nothing listed: an http URL is refused before any lookup, as it always was.
    if (!allowed.any && !schemeAllowed(url, false)) return new BlockedAddressError(HTTPS_ONLY);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return new BlockedAddressError(HTTPS_ONLY);
    const { pinned, listed } = await resolveAllowedAddress(url, { allowLoopback: options.allowLoopback, privateHosts: allowed }, signal);
    return schemeAllowed(url, listed) ? pinned : new BlockedAddressError(HTTPS_ONLY);
  }

  return {
    async refusal(url) {
      try {
        const checked = await check(url);
        return checked instanceof BlockedAddressError ? checked.message : undefined;
      } catch (error) {
        return error instanceof BlockedAddressError ? error.message : 'the host does not resolve';
      }
    },
    async post(target, request): Promise<PostOutcome> {
      const deadline = AbortSignal.any([request.signal, AbortSignal.timeout(request.timeoutMs)]);
      const why = (error: unknown) =>
        request.signal.aborted ? 'interrupted: the service stopped' : deadline.aborted ? `timed out after ${request.timeoutMs / 1000} s` : oneLine(error);
      const url = new URL(target);
      let pinned;
      try {
        const checked = await check(url, deadline);
        if (checked instanceof BlockedAddressError) return { error: `refused: ${checked.message}` };
        pinned = checked;
      } catch (error) {
        return { error: error instanceof BlockedAddressError ? `refused: ${error.message}` : why(error) };
      }
      const client = url.protocol === 'https:' ? https : http;
      return new Promise<PostOutcome>((resolve) => {
        const sent = client.request(
          url,
          {
            method: 'POST',
            headers: { ...request.headers, 'content-length': String(Buffer.byteLength(request.body)) },
            signal: deadline,
            // One connection per attempt, to the address checked above.
            agent: false,
            lookup: pinnedLookup(pinned),
          },
          (response) => {
            // Only the status matters: the connection is closed at once rather than the body
            // read, which a hostile receiver could make endless and so hold a socket past the
            // attempt (and outside WEBHOOK_MAX_IN_FLIGHT) until the deadline.
            resolve({ statusCode: response.statusCode ?? 0 });
            response.on('error', () => undefined);
            response.destroy();
          },
        );
        sent.on('error', (error) => resolve({ error: why(error) }));
        sent.end(request.body);
      });
    },
  };
}

/** Whether the URL names a loopback host by address or as localhost (the only http targets tests may use). */
function loopbackHost(url: URL): boolean {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || /^127\./.test(host) || host === '::1';
}
