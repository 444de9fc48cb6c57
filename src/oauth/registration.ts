import type { Hono } from 'hono';
import { OAuthProtocolError } from '../domain/oauth/errors.js';
import { registerDynamicClient } from '../domain/oauth/registration.js';
import { registrationKey } from '../domain/rate-limits.js';
import { MAX_BODY_BYTES, readLimitedBody } from '../http/body.js';
import { clientAddress } from '../http/request.js';
import type { OAuthEndpointDeps } from './deps.js';
import { runProtocolEndpoint } from './protocol.js';

/**
 * Dynamic client registration (RFC 7591, deprecated in the docs): a JSON body, not a form,
 * and open to anyone, so every attempt draws from a per-address registration limit.
 */
export function mountRegistrationEndpoint(app: Hono, deps: OAuthEndpointDeps): void {
  const { config, limiter, clock, log, oauth } = deps;
  app.post('/oauth/register', (c) =>
    runProtocolEndpoint(deps, c, async () => {
      // Every registration attempt takes a token: each success stores a client for good.
      const address = clientAddress(c);
      if (address !== undefined) {
        const taken = await limiter.take(registrationKey(address), config.rateLimits.registrations, clock.now());
        if (!taken.allowed) {
          throw new OAuthProtocolError(
            'temporarily_unavailable',
            `Too many client registrations from this address; retry after ${taken.retryAfterSeconds} s.`,
            taken.retryAfterSeconds,
          );
        }
      }
      let bytes: Uint8Array;
      try {
        bytes = await readLimitedBody(c.req.raw);
      } catch {
        // RFC 7591 §3.2.2's error JSON, with the status that says what is wrong (docs/reference/rules.md "Errors and limits").
        return c.json({ error: 'invalid_client_metadata', error_description: `The body exceeds ${MAX_BODY_BYTES} bytes.` }, 413, {
          'Cache-Control': 'no-store',
          Pragma: 'no-cache',
        });
      }
      let body: unknown;
      try {
        body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
      } catch {
        throw new OAuthProtocolError('invalid_client_metadata', 'The body must be a JSON object.');
      }
      const registered = await registerDynamicClient(oauth, body);
      log.info({ msg: 'client registered dynamically', clientId: registered.client_id });
      return c.json(registered, 201, { 'Cache-Control': 'no-store', Pragma: 'no-cache' });
    }),
  );
}
