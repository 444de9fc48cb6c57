import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { startOAuthTestServer, type OAuthTestServer } from '../helpers/oauth.js';

/**
 * The development sign-in with a one-time code (DEVELOPMENT_SIGN_IN=code,
 * docs/operators/identity-provider.md "Where the development sign-in is allowed"): the console's
 * form needs the code the log prints, each code signs in once, a wrong one costs the address's
 * failure budget. Real HTTP against a service on a loopback port, and the same in Chromium.
 */

const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '', DEVELOPMENT_SIGN_IN: 'code' };
let server: OAuthTestServer;
let limited: OAuthTestServer;
let browser: Browser;

beforeAll(async () => {
  [server, limited, browser] = await Promise.all([
    startOAuthTestServer({ env: DEVELOPMENT_ENV }),
    startOAuthTestServer({ env: { ...DEVELOPMENT_ENV, AUTH_FAILURES_PER_MINUTE: '3' } }),
    chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] }),
  ]);
}, 60_000);
afterAll(() => Promise.all([server?.close(), limited?.close(), browser?.close()]));

/** The lines of the log that print a code, oldest first. */
function codeLines(of: OAuthTestServer): { level: string; code: string; signIn: string }[] {
  return of.logs
    .map((line) => JSON.parse(line) as { msg: string; level: string; code: string; signIn: string })
    .filter((line) => line.msg === 'development sign-in code');
}
const latestCode = (of: OAuthTestServer) => codeLines(of).at(-1)!.code;

function signIn(of: OAuthTestServer, fields: Record<string, string>) {
  return fetch(`${of.issuer}/console/sign-in/development`, {
    method: 'POST',
    redirect: 'manual',
    headers: { origin: of.issuer, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields),
  });
}

describe('the one-time code of the development sign-in', () => {
  it('is printed at start in a warn line, with the link that fills it in', () => {
    const [line] = codeLines(server);
    expect(line).toMatchObject({ level: 'warn', signIn: `${server.issuer}/console/sign-in?code=${line!.code}` });
    expect(line!.code).toMatch(/^[0-9a-z]{5}(-[0-9a-z]{5}){3}$/);
    // Each service has its own.
    expect(latestCode(limited)).not.toBe(line!.code);
  });

  it('is asked for by the sign-in page, which ?code= fills in and nothing else can', async () => {
    const page = await (await fetch(`${server.issuer}/console/sign-in`)).text();
    expect(page).toContain('name="code"');
    expect(page).toContain('whoever has the one-time sign-in code can sign in as any owner');
    const filled = await (await fetch(`${server.issuer}/console/sign-in?code=abcde-12345`)).text();
    expect(filled).toMatch(/id="code"[^>]*value="abcde-12345"/);
    const junk = await (await fetch(`${server.issuer}/console/sign-in?code=${encodeURIComponent('"><b>x</b>')}`)).text();
    expect(junk).not.toContain('<b>x</b>');
    expect(junk).not.toMatch(/id="code"[^>]*value=/);
  });

  it('is needed: a sign-in without it, with a wrong one or with part of it is refused with 401 and no session', async () => {
    const code = latestCode(server);
    const attempts: Record<string, string>[] = [
      { sub: 'mallory' },
      { sub: 'mallory', code: 'aaaaa-bbbbb-ccccc-ddddd' },
      { sub: 'mallory', code: code.slice(0, -1) },
    ];
    for (const fields of attempts) {
      const res = await signIn(server, fields);
      expect(res.status).toBe(401);
      expect(res.headers.get('set-cookie')).toBeNull();
      expect(await res.text()).toContain('That is not the current sign-in code.');
    }
    // A refused attempt leaves the code as it was.
    expect(latestCode(server)).toBe(code);
  });

  it('signs in once: the same code again is refused, and the next one the log prints works', async () => {
    const first = latestCode(server);
    const res = await signIn(server, { sub: 'alice', code: first });
    expect(res.status).toBe(303);
    const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
    const console = await (await fetch(`${server.issuer}/console`, { headers: { cookie } })).text();
    expect(console).toContain('Signed in as <strong id="signed-in-as">alice</strong>');

    expect((await signIn(server, { sub: 'mallory', code: first })).status).toBe(401);
    const next = latestCode(server);
    expect(next).not.toBe(first);
    // Typed as a person may: in capitals, without the dashes.
    expect((await signIn(server, { sub: 'bob', code: next.toUpperCase().replaceAll('-', '') })).status).toBe(303);
  });

  it('is not used up by a form with a bad owner name', async () => {
    const code = latestCode(server);
    expect((await signIn(server, { sub: 'not a name', code })).status).toBe(400);
    expect((await signIn(server, { sub: 'carol', code })).status).toBe(303);
  });

  it('costs the address failure budget when wrong: past it even the right code is refused with 429 and Retry-After', async () => {
    for (let i = 0; i < 3; i++) expect((await signIn(limited, { sub: 'mallory', code: `wrong-${i}` })).status).toBe(401);
    const over = await signIn(limited, { sub: 'mallory', code: 'wrong-again' });
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    const code = latestCode(limited);
    const right = await signIn(limited, { sub: 'alice', code });
    expect(right.status).toBe(429);
    expect(right.headers.get('set-cookie')).toBeNull();
    // Not compared, so not used up.
    expect(latestCode(limited)).toBe(code);
  });
});

describe('the one-time code in a browser', () => {
  it('opens the link the log prints, fills in the owner and lands in the console', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(codeLines(server).at(-1)!.signIn);
    expect(await page.inputValue('#code')).toBe(latestCode(server));
    await page.fill('#sub', 'dora');
    await Promise.all([page.waitForURL((url) => url.pathname === '/console'), page.click('#development-sign-in')]);
    expect(await page.textContent('#signed-in-as')).toBe('dora');
    await context.close();
  });

  it('signs in with the code typed into the form', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${server.issuer}/console`);
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    await page.fill('#sub', 'erin');
    await page.fill('#code', latestCode(server));
    await Promise.all([page.waitForURL((url) => url.pathname === '/console'), page.click('#development-sign-in')]);
    expect(await page.textContent('#signed-in-as')).toBe('erin');
    await context.close();
  });
});
