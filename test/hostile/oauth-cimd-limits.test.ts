import http from 'node:http';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDocumentFetcher } from '../../src/oauth/cimd-fetch.js';
import { embeddedIpv4, isFetchableAddress } from '../../src/http/ssrf.js';
import { cimdFetchKey, CIMD_FETCH_LIMITS } from '../../src/oauth/cimd-limits.js';
import { authorizationUrl, decide, ownerCookie, pkce, startOAuthTestServer, tokenRequest } from '../helpers/oauth.js';
import type { TestServer } from '../helpers/server.js';

/**
 * Client ID Metadata Document fetching under hostile use: the address
 * classifier on every IPv6 spelling of a blocked IPv4 address, the real fetcher against a
 * loopback server, the per-address and concurrency budgets, no row before an owner approves,
 * one message for every failed fetch, and error pages (not redirects) for dynamically
 * registered clients no owner approved.
 */

const CALLBACK = 'http://127.0.0.1:9/callback';

describe('the address classifier', () => {
  const refused = [
    // IPv4 ranges
    ['127.0.0.1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local, cloud metadata'],
    ['100.64.0.1', 'CGNAT'],
    ['0.0.0.0', 'this network'],
    ['192.88.99.1', '6to4 relay anycast'],
    ['255.255.255.255', 'broadcast'],
    // IPv6 ranges
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fd00::1', 'unique local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local with a zone'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation (RFC 9637)'],
    ['100::1', 'discard'],
    // IPv4-mapped (RFC 4291 §2.5.5.2), every spelling
    ['::ffff:127.0.0.1', 'mapped loopback, dotted'],
    ['::ffff:7f00:1', 'mapped loopback, hex'],
    ['::FFFF:7F00:0001', 'mapped loopback, upper case'],
    ['0:0:0:0:0:ffff:7f00:1', 'mapped loopback, uncompressed'],
    ['::ffff:10.0.0.1', 'mapped private'],
    ['::ffff:a9fe:a9fe', 'mapped 169.254.169.254'],
    ['::ffff:0:0', 'mapped 0.0.0.0'],
    // IPv4-translated (RFC 2765)
    ['::ffff:0:127.0.0.1', 'translated loopback'],
    ['::ffff:0:a00:1', 'translated 10.0.0.1'],
    // IPv4-compatible (deprecated), any IPv4 inside
    ['::127.0.0.1', 'compatible loopback'],
    ['::7f00:1', 'compatible loopback, hex'],
    ['::8.8.8.8', 'compatible, even a public one'],
    // NAT64 (RFC 6052 well-known prefix; RFC 8215 local use)
    ['64:ff9b::127.0.0.1', 'NAT64 loopback'],
    ['64:ff9b::7f00:1', 'NAT64 loopback, hex'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 169.254.169.254'],
    ['64:ff9b::c0a8:101', 'NAT64 192.168.1.1'],
    ['64:ff9b:1::8.8.8.8', 'local-use NAT64'],
    // 6to4 (RFC 3056): 2002:AABB:CCDD::/48 embeds AA.BB.CC.DD
    ['2002:7f00:1::', '6to4 loopback'],
    ['2002:7f00:1::1', '6to4 loopback, host part'],
    ['2002:a00:1:1::1', '6to4 10.0.0.1'],
    ['2002:a9fe:a9fe::', '6to4 169.254.169.254'],
    ['2002:c0a8:101::1', '6to4 192.168.1.1'],
    // Teredo (RFC 4380)
    ['2001::1', 'Teredo'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo, a real-looking one'],
    // not addresses
    ['localhost', 'a name'],
    ['', 'empty'],
    ['1.2.3', 'short'],
  ] as const;
  it.each(refused)('refuses %s (%s)', (address) => {
    expect(isFetchableAddress(address)).toBe(false);
  });

  const allowed = [
    ['8.8.8.8', 'public IPv4'],
    ['93.184.216.34', 'public IPv4'],
    ['2606:2800:220:1:248:1893:25c8:1946', 'public IPv6'],
    ['2a00:1450:4001:80b::200e', 'public IPv6'],
    ['::ffff:8.8.8.8', 'mapped public'],
    ['::ffff:808:808', 'mapped public, hex'],
    ['64:ff9b::8.8.8.8', 'NAT64 of a public address (DNS64 networks)'],
    ['2002:808:808::1', '6to4 of a public address'],
  ] as const;
  it.each(allowed)('allows %s (%s)', (address) => {
    expect(isFetchableAddress(address)).toBe(true);
  });

  it('reads the IPv4 address each form embeds', () => {
    expect(embeddedIpv4('::ffff:7f00:1')).toBe('127.0.0.1');
    expect(embeddedIpv4('::ffff:0:a00:1')).toBe('10.0.0.1');
    expect(embeddedIpv4('64:ff9b::a9fe:a9fe')).toBe('169.254.169.254');
    expect(embeddedIpv4('2002:c0a8:101::1')).toBe('192.168.1.1');
    expect(embeddedIpv4('2606:2800:220:1::1')).toBeUndefined();
  });

  it('lets loopback through only with the test-only flag, in either spelling', () => {
    expect(isFetchableAddress('127.0.0.1', true)).toBe(true);
    expect(isFetchableAddress('::ffff:7f00:1', true)).toBe(true);
    expect(isFetchableAddress('10.0.0.1', true)).toBe(false);
  });

  it('counts an IPv6 client by its /64 and an IPv4 client (mapped or not) by its address', () => {
    expect(cimdFetchKey('2001:db8:1:2:aaaa::1')).toBe(cimdFetchKey('2001:db8:1:2:bbbb::2'));
    expect(cimdFetchKey('2001:db8:1:2::1')).not.toBe(cimdFetchKey('2001:db8:1:3::1'));
    expect(cimdFetchKey('::ffff:127.0.0.1')).toBe(cimdFetchKey('127.0.0.1'));
  });
});

/** A document server on loopback that counts connections and requests in flight. */
async function documentServer(delayMs = 0) {
  const state = { requests: 0, inFlight: 0, maxInFlight: 0 };
  const server = http.createServer((req, res) => {
    state.requests += 1;
    state.inFlight += 1;
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
    setTimeout(() => {
      state.inFlight -= 1;
      const self = `http://127.0.0.1:${(server.address() as { port: number }).port}${req.url}`;
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ client_id: self, client_name: 'Doc client', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' }));
    }, delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return { state, port, base: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(resolve)) };
}

describe('the fetcher against a real loopback server', () => {
  let docs: Awaited<ReturnType<typeof documentServer>>;
  beforeAll(async () => {
    docs = await documentServer();
  });
  afterAll(() => docs.close());

  it('fetches with the test-only flag (the normal case)', async () => {
    const fetchDocument = createDocumentFetcher({ allowLoopback: true });
    const doc = await fetchDocument(new URL(`${docs.base}/ok.json`));
    expect(JSON.parse(doc.body).client_name).toBe('Doc client');
  });

  it.each([
    ['127.0.0.1', (port: number) => `http://127.0.0.1:${port}/x.json`],
    ['localhost (a name resolving to loopback)', (port: number) => `http://localhost:${port}/x.json`],
    ['[::ffff:127.0.0.1]', (port: number) => `http://[::ffff:127.0.0.1]:${port}/x.json`],
    ['[::ffff:7f00:1]', (port: number) => `http://[::ffff:7f00:1]:${port}/x.json`],
    ['[::127.0.0.1]', (port: number) => `http://[::127.0.0.1]:${port}/x.json`],
    ['[64:ff9b::7f00:1]', (port: number) => `http://[64:ff9b::7f00:1]:${port}/x.json`],
    ['[2002:7f00:1::]', (port: number) => `http://[2002:7f00:1::]:${port}/x.json`],
  ])('refuses %s without connecting', async (_label, url) => {
    const fetchDocument = createDocumentFetcher({ allowLoopback: false });
    const before = docs.state.requests;
    await expect(fetchDocument(new URL(url(docs.port)))).rejects.toThrow(/non-public/);
    expect(docs.state.requests).toBe(before);
  });
});

describe('metadata-document fetches on the authorization endpoint (OAUTH_CIMD_ALLOW_LOOPBACK=true)', () => {
  let server: TestServer & { issuer: string; resource: string };
  let docs: Awaited<ReturnType<typeof documentServer>>;
  const agents: Agent[] = [];
  let nextAddress = 30;

  beforeAll(async () => {
    server = await startOAuthTestServer({ env: { OAUTH_CIMD_ALLOW_LOOPBACK: 'true' } });
    docs = await documentServer(300);
  });
  afterAll(async () => {
    await Promise.all(agents.map((agent) => agent.close()));
    await server.close();
    await docs.close();
  });

  /** GET an authorization URL from a loopback address of its own (127.0.0.30, .31, …). */
  const from = () => {
    const agent = new Agent({ localAddress: `127.0.0.${nextAddress++}` });
    agents.push(agent);
    return async (url: string, cookie?: string) => {
      const res = await undiciFetch(url, { dispatcher: agent, redirect: 'manual', headers: cookie ? { cookie } : {} });
      return { status: res.status, headers: res.headers, text: await res.text() };
    };
  };
  let unique = 0;
  const documentUrl = () => `${docs.base}/client-${unique++}.json`;
  const authorize = (clientId: string) => authorizationUrl(server.issuer, { client_id: clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge });
  const metadataRows = async () =>
    (await server.service.db.get<{ n: number }>("SELECT count(*) AS n FROM oauth_clients WHERE source = 'metadata-document'"))!.n;

  it('refuses a flood of distinct documents from one address beyond its budget, creating no row; another address is served', async () => {
    const get = from();
    const budget = CIMD_FETCH_LIMITS.perAddress.burst;
    const before = docs.state.requests;
    const statuses: number[] = [];
    let limited: { status: number; headers: Headers; text: string } | undefined;
    for (let i = 0; i < budget + 5; i++) {
      const res = await get(authorize(documentUrl()));
      statuses.push(res.status);
      if (res.status === 429) limited = res;
    }
    // Fetched documents pass the checks, so an anonymous caller is sent to sign in.
    expect(statuses.slice(0, budget)).toEqual(Array(budget).fill(302));
    expect(statuses.slice(budget)).toEqual(Array(5).fill(429));
    expect(Number(limited!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(limited!.text).toContain('retry after');
    expect(docs.state.requests - before).toBe(budget);
    expect(await metadataRows()).toBe(0);
    // A document already fetched is served from the cache, without a fetch or a token.
    expect((await get(authorize(`${docs.base}/client-0.json`))).status).toBe(302);
    expect(docs.state.requests - before).toBe(budget);
    expect((await from()(authorize(documentUrl()))).status).toBe(302);
  });

  it(`caps fetches in flight at ${CIMD_FETCH_LIMITS.maxConcurrent} across addresses: the rest are refused at once`, async () => {
    docs.state.maxInFlight = 0;
    const n = CIMD_FETCH_LIMITS.maxConcurrent * 2;
    const answers = await Promise.all(Array.from({ length: n }, () => from()(authorize(documentUrl()))));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 302)).toHaveLength(CIMD_FETCH_LIMITS.maxConcurrent);
    expect(statuses.filter((s) => s === 429)).toHaveLength(n - CIMD_FETCH_LIMITS.maxConcurrent);
    expect(docs.state.maxInFlight).toBeLessThanOrEqual(CIMD_FETCH_LIMITS.maxConcurrent);
    // Once they are done, the next one is fetched.
    expect((await from()(authorize(documentUrl()))).status).toBe(302);
  });

  it('stores the client only when an owner approves it; the code then works at the token endpoint', async () => {
    const cookie = await ownerCookie(server.issuer, await server.ownerToken('cimd-limits-owner'));
    const clientId = documentUrl();
    const { verifier, challenge } = pkce();
    const url = authorizationUrl(server.issuer, { client_id: clientId, redirect_uri: CALLBACK, code_challenge: challenge });
    const page = await from()(url, cookie);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Doc client');
    expect(await metadataRows()).toBe(0);
    const back = await decide(url, cookie);
    expect(await metadataRows()).toBe(1);
    const answer = await tokenRequest(server.issuer, {
      grant_type: 'authorization_code',
      client_id: clientId,
      code: back.searchParams.get('code')!,
      redirect_uri: CALLBACK,
      code_verifier: verifier,
    });
    expect(answer.status).toBe(200);
  });
});

describe('one message for every failed fetch (no OAUTH_CIMD_ALLOW_LOOPBACK)', () => {
  let server: TestServer & { issuer: string; resource: string };
  beforeAll(async () => {
    server = await startOAuthTestServer();
  });
  afterAll(() => server.close());

  it('answers a name that does not resolve, a private address and a loopback name alike, naming none of them; the log has the reason', async () => {
    const cases = ['https://no-such-host.internal.invalid/c.json', 'https://10.0.0.7/c.json', 'https://localhost:1/c.json', 'https://[::ffff:7f00:1]/c.json'];
    const pages: string[] = [];
    for (const clientId of cases) {
      const res = await fetch(authorizationUrl(server.issuer, { client_id: clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge }), {
        redirect: 'manual',
      });
      expect(res.status).toBe(400);
      const text = await res.text();
      expect(text).toContain('metadata document could not be fetched.');
      for (const secret of ['no-such-host', 'internal', '10.0.0.7', 'localhost', '127.0.0.1', '7f00', 'ENOTFOUND', 'non-public'])
        expect(text).not.toContain(secret);
      pages.push(text);
    }
    expect(new Set(pages).size).toBe(1);
    expect(server.logs.join('\n')).toMatch(/client metadata document refused[\s\S]*non-public/);
  });

  it("shows an error page, not an error redirect, to a dynamically registered client until the signed-in owner's workspace approved it", async () => {
    const registered = await fetch(`${server.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Anonymous', redirect_uris: ['https://attacker.example/cb'], token_endpoint_auth_method: 'none' }),
    });
    const clientId = ((await registered.json()) as { client_id: string }).client_id;
    const badScope = (cookie?: string) =>
      fetch(
        authorizationUrl(server.issuer, { client_id: clientId, redirect_uri: 'https://attacker.example/cb', code_challenge: pkce().challenge, scope: 'admin' }),
        { redirect: 'manual', ...(cookie ? { headers: { cookie } } : {}) },
      );
    const before = await badScope();
    expect(before.status).toBe(400);
    expect(before.headers.get('location')).toBeNull();
    expect(await before.text()).toContain('invalid_scope');
    // Once an owner approved it, its redirect URI is trusted by that owner: errors go back there (the normal case).
    const cookie = await ownerCookie(server.issuer, await server.ownerToken('dcr-owner'));
    const url = authorizationUrl(server.issuer, { client_id: clientId, redirect_uri: 'https://attacker.example/cb', code_challenge: pkce().challenge });
    expect((await decide(url, cookie)).searchParams.get('code')).toBeTruthy();
    const after = await badScope(cookie);
    expect(after.status).toBe(302);
    expect(new URL(after.headers.get('location')!).searchParams.get('error')).toBe('invalid_scope');
    // Anyone can make a workspace and approve their own client there: that vouches for nothing
    // to a visitor with no session, nor to another owner (no open redirector).
    const other = await ownerCookie(server.issuer, await server.ownerToken('dcr-other-owner'));
    for (const visitor of [undefined, other]) {
      const res = await badScope(visitor);
      expect(res.status).toBe(400);
      expect(res.headers.get('location')).toBeNull();
      expect(await res.text()).toContain('invalid_scope');
    }
    // The other owner's explicit Deny of a valid request still goes back to the client (RFC 6749 §4.1.2.1).
    const denied = await decide(url, other, 'deny');
    expect(denied.origin).toBe('https://attacker.example');
    expect(denied.searchParams.get('error')).toBe('access_denied');
  });
});
