import http from 'node:http';
import https from 'node:https';
import type { PostOutcome, WebhookTransport } from '../domain/webhook-transport.js';
import { oneLine } from '../domain/errors.js';
import { BlockedAddressError, pinnedLookup, resolvePublicAddress } from './ssrf.js';

/**
 * Sends webhooks (docs/owners/webhooks.md) through the SSRF guard OAuth metadata fetching uses
 * (src/http/ssrf.ts): HTTPS only, public addresses only, checked when a webhook is registered
 * and again on every attempt (DNS may have changed since), the connection pinned to the
 * checked address. `allowLoopback` is the test-only OAUTH_CIMD_ALLOW_LOOPBACK: it admits
 * loopback addresses, and http to them. No redirects are followed: a 3xx is a failed attempt.
 */
export function createWebhookTransport(options: { allowLoopback: boolean }): WebhookTransport {
  const allowedScheme = (url: URL) => url.protocol === 'https:' || (options.allowLoopback && url.protocol === 'http:' && loopbackHost(url));

  return {
    async refusal(url) {
      if (!allowedScheme(url)) return 'webhooks are sent over https only';
      try {
        await resolvePublicAddress(url, options.allowLoopback);
        return undefined;
      } catch (error) {
        return error instanceof BlockedAddressError ? error.message : 'the host does not resolve';
      }
    },
    async post(target, request): Promise<PostOutcome> {
      const deadline = AbortSignal.any([request.signal, AbortSignal.timeout(request.timeoutMs)]);
      const why = (error: unknown) =>
        request.signal.aborted ? 'interrupted: the service stopped' : deadline.aborted ? `timed out after ${request.timeoutMs / 1000} s` : oneLine(error);
      const url = new URL(target);
      if (!allowedScheme(url)) return { error: 'refused: webhooks are sent over https only' };
      let pinned;
      try {
        pinned = await resolvePublicAddress(url, options.allowLoopback, deadline);
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
