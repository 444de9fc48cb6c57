import * as client from 'openid-client';
import type { Config } from '../config.js';
import type { Logger } from '../domain/context.js';

/**
 * The console's OpenID Connect sign-in (docs/owners/console.md "Owner console"): authorization code with PKCE
 * (S256), state and nonce, against the provider at OWNER_ISSUER found by discovery. The
 * protocol is openid-client's, a certified relying party: this file only configures it.
 */

export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret?: string;
  redirectUri: string;
  log: Logger;
}

export function oidcSettings(config: Config, log: Logger): OidcSettings | undefined {
  if (config.owner.mode !== 'external' || !config.owner.oidc) return undefined;
  return {
    issuer: config.owner.issuer,
    ...config.owner.oidc,
    redirectUri: `${config.publicBaseUrl}/console/oidc/callback`,
    log,
  };
}

/** What rides from the start of a sign-in to its callback, in a short-lived cookie of this browser. */
export interface PendingSignIn {
  state: string;
  nonce: string;
  verifier: string;
}

/**
 * An http issuer is accepted only on a loopback host (a provider on the owner's own machine, or
 * the one the tests start); anywhere else the provider must be https, as openid-client insists.
 */
const loopbackHttp = (issuer: URL) => issuer.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(issuer.hostname);

export function createOidcClient(settings: OidcSettings) {
  let discovered: Promise<client.Configuration> | undefined;
  /** Discovery on first use, kept; a failure is not kept, so the next sign-in tries again. */
  const configuration = () => {
    if (!discovered) {
      const issuer = new URL(settings.issuer);
      discovered = client.discovery(
        issuer,
        settings.clientId,
        undefined,
        settings.clientSecret ? client.ClientSecretBasic(settings.clientSecret) : client.None(),
        loopbackHttp(issuer) ? { execute: [client.allowInsecureRequests] } : undefined,
      );
      discovered.catch((error: unknown) => {
        discovered = undefined;
        settings.log.warn({ msg: 'OpenID provider discovery failed', issuer: settings.issuer, error: error instanceof Error ? error.message : String(error) });
      });
    }
    return discovered;
  };

  return {
    /** Where to send the browser, and what its callback must match. */
    async start(): Promise<{ url: string; pending: PendingSignIn }> {
      const config = await configuration();
      const pending = { state: client.randomState(), nonce: client.randomNonce(), verifier: client.randomPKCECodeVerifier() };
      const url = client.buildAuthorizationUrl(config, {
        redirect_uri: settings.redirectUri,
        scope: 'openid',
        response_type: 'code',
        code_challenge: await client.calculatePKCECodeChallenge(pending.verifier),
        code_challenge_method: 'S256',
        state: pending.state,
        nonce: pending.nonce,
      });
      return { url: url.href, pending };
    },
    /**
     * Trades the code for tokens and returns the ID token's claims, checked by openid-client
     * (issuer, audience = our client id, expiry, nonce, state, the PKCE verifier).
     */
    async finish(callbackQuery: string, pending: PendingSignIn): Promise<Record<string, unknown>> {
      const config = await configuration();
      const tokens = await client.authorizationCodeGrant(config, new URL(`${settings.redirectUri}${callbackQuery}`), {
        pkceCodeVerifier: pending.verifier,
        expectedState: pending.state,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
      return { ...tokens.claims() };
    },
  };
}

export type OidcClient = ReturnType<typeof createOidcClient>;
