import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, lampManifest } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

/**
 * docs/agents/connecting.md: the MCP TypeScript SDK snippet, taken from the page as it is and run
 * with Node against a real server, connects with an agent token and lists the agent's tools.
 */
const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
const page = fs.readFileSync(path.join(root, 'docs/agents/connecting.md'), 'utf8');
const snippet = /<!-- tested: mcp-typescript-client -->\n+```ts\n([\s\S]*?)\n```\n/.exec(page)?.[1];

let dir: string;

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  // The snippet runs from a folder of its own that sees the project's packages, as a reader's would.
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-snippet-'));
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
});

afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('docs/agents/connecting.md, the MCP TypeScript SDK snippet', () => {
  it('is marked on the page', () => {
    expect(snippet).toBeDefined();
  });

  it('connects with an agent token and prints the tools the agent was granted', { timeout: 60_000 }, async () => {
    const owner = await server.ownerToken('snippet-owner');
    const lamp = await attachDevice(api, owner, { name: 'Desk lamp', manifest: lampManifest });
    const agent = await createAgent(api, owner, { principal: 'agent:snippet' });
    await grant(api, owner, 'agent:snippet', lamp.id, ['set_power']);

    const file = path.join(dir, 'snippet.mts');
    fs.writeFileSync(file, snippet!);
    const { stdout } = await run(process.execPath, ['--import', 'tsx', file], {
      cwd: dir,
      env: { ...process.env, DFC_MCP_URL: `${server.url}/mcp`, AGENT_TOKEN: agent.token },
    });
    const tools = new Set(stdout.match(/[a-z_]+(?:__[0-9a-f]{12})?/g));
    for (const name of ['list_devices', 'list_functions', 'get_action', 'cancel_action', 'broadcast']) expect(tools).toContain(name);
    expect(
      [...tools].filter((name) => name.startsWith('set_power__')),
      stdout,
    ).toHaveLength(1);
  });
});
