import { beforeAll, describe, expect, it } from 'vitest';
import { ACCESS_TOKEN_TTL_MS } from '../../src/domain/oauth/token.js';
import { manualClock } from '../helpers/clock.js';
import { createAgent } from '../helpers/fixtures.js';
import { useOAuthTestServer } from '../helpers/oauth.js';
import { listen } from '../helpers/tasks-client.js';
import { oauthAgent } from '../helpers/world.js';

/**
 * A subscriptions/listen stream outlives the request that opened it, so the credential that
 * opened it is checked again while it runs (docs/agents/tasks.md "Notifications"): an OAuth
 * access token revoked or expired ends its streams as it ends its requests, and streams are
 * capped in number and lifetime.
 */
let owner: string;
const clock = manualClock();

const server = useOAuthTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-standing');
});

const isMethod = (method: string) => (m: Record<string, any>) => m.method === method;

const oauthToken = (name: string) => oauthAgent(server, owner, { name });

describe('an OAuth access token’s subscriptions end with the token', () => {
  it('ends the subscription, with its result, once the token is revoked at /oauth/revoke', async () => {
    const { token, clientId } = await oauthToken('revoked-listener');
    const stream = await listen(server.url, token, { toolsListChanged: true });
    expect(stream.status).toBe(200);
    await stream.next(isMethod('notifications/subscriptions/acknowledged'));
    const revoked = await fetch(`${server.issuer}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token, client_id: clientId }),
    });
    expect(revoked.status).toBe(200);
    const last = await stream.next((m) => m.id === 'listen-1', 6000);
    expect(last.result).toMatchObject({ resultType: 'complete' });
    await stream.ended;
  });

  it('ends the subscription once the token expires, though its connection lives on', async () => {
    const { token } = await oauthToken('expiring-listener');
    const stream = await listen(server.url, token, { toolsListChanged: true });
    await stream.next(isMethod('notifications/subscriptions/acknowledged'));
    clock.advance(ACCESS_TOKEN_TTL_MS + 1000);
    try {
      const last = await stream.next((m) => m.id === 'listen-1', 6000);
      expect(last.result).toMatchObject({ resultType: 'complete' });
      await stream.ended;
    } finally {
      clock.advance(-(ACCESS_TOKEN_TTL_MS + 1000));
    }
  });

  it('keeps an agent token’s subscription open while its connection is live', async () => {
    const agent = await createAgent(api, owner, { name: 'steady', access: 'act', principal: 'agent:steady' });
    const stream = await listen(server.url, agent.token, { toolsListChanged: true });
    await stream.next(isMethod('notifications/subscriptions/acknowledged'));
    await expect(stream.next((m) => m.id === 'listen-1', 4500)).rejects.toThrow();
    stream.close();
  });
});
