import { execFile, spawnSync } from 'node:child_process';
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
 * with Node against a real server, connects with an agent token and lists the agent's tools; each
 * JSON configuration on the page parses and names the MCP URL and the bearer header the way its
 * client reads them; the VS Code command carries a server entry of the same shape.
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

    // Saved as the page says, agent.mjs, and run with plain Node: no TypeScript loader.
    const file = path.join(dir, 'agent.mjs');
    fs.writeFileSync(file, snippet!);
    const { stdout } = await run(process.execPath, [file], {
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

const blocks = (lang: string) => [...page.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)\\n```', 'g'))].map((match) => match[1]!);
const MCP_URL = 'https://dfc.example.com/mcp';

describe('docs/agents/connecting.md, the client configurations', () => {
  const configs = blocks('json').map((text) => JSON.parse(text) as Record<string, Record<string, Record<string, unknown>>>);

  it('are all valid JSON, one per client that reads a file (Claude Desktop, Cursor, VS Code)', () => {
    expect(configs).toHaveLength(3);
  });

  it('give Claude Desktop an mcp-remote bridge with the header passed through env', () => {
    const desktop = configs.find((config) => config.mcpServers?.devices?.command)!.mcpServers!.devices!;
    expect(desktop.command).toBe('npx');
    const args = desktop.args as string[];
    expect(args.slice(0, 2)).toEqual(['-y', 'mcp-remote']);
    expect(new URL(args[2]!).pathname).toBe('/mcp');
    expect(args.slice(3)).toEqual(['--header', 'Authorization:${AUTH_HEADER}']);
    expect((desktop.env as Record<string, string>).AUTH_HEADER).toMatch(/^Bearer /);
  });

  it('give Cursor the URL and an Authorization bearer header', () => {
    const cursor = configs.find((config) => config.mcpServers?.devices?.url)!.mcpServers!.devices!;
    expect(cursor.url).toBe(MCP_URL);
    expect(cursor.headers).toEqual({ Authorization: expect.stringMatching(/^Bearer \$\{env:[A-Z_]+\}$/) });
  });

  it('give VS Code an http server with the URL, and a bearer header read from a declared input', () => {
    const vscode = configs.find((config) => config.servers)!;
    const server = vscode.servers!.devices!;
    expect(server.type).toBe('http');
    expect(server.url).toBe(MCP_URL);
    const input = /^Bearer \$\{input:([a-z-]+)\}$/.exec((server.headers as Record<string, string>).Authorization!)?.[1];
    expect((vscode.inputs as unknown as { id: string; password: boolean }[]).find((entry) => entry.id === input)?.password).toBe(true);
  });

  it('give the Python clients programs that parse, each naming the URL and the bearer header', () => {
    const programs = blocks('python');
    expect(programs.length).toBeGreaterThanOrEqual(2);
    for (const program of programs) {
      const parsed = spawnSync('python3', ['-c', 'import ast, sys; ast.parse(sys.stdin.read())'], { input: program, encoding: 'utf8' });
      expect(parsed.status, parsed.stderr).toBe(0);
      expect(program).toContain(`"url": "${MCP_URL}"`);
      expect(program).toContain(`"headers": {"Authorization": f"Bearer {os.environ['AGENT_TOKEN']}"}`);
    }
  });

  it('give VS Code an --add-mcp command whose JSON is a named http server entry', () => {
    const command = blocks('sh')
      .map((text) => /^code --add-mcp '(.*)'$/.exec(text)?.[1])
      .find(Boolean);
    expect(JSON.parse(command!)).toEqual({ name: 'devices', type: 'http', url: MCP_URL });
  });
});
