/**
 * The ready-to-paste client configurations the Agents screen shows after an agent connection or
 * an OAuth client is created: the MCP URL, and for each client its configuration with the token
 * filled in (or, for an OAuth client, without a header: the client signs in by itself). The same
 * shapes are documented in docs/agents/connecting.md.
 */

/** The name a client lists the service under. */
export const SERVER_NAME = 'devices';

export interface ClientConfig {
  /** The element id of the snippet, for its copy button and the tests. */
  id: string;
  title: string;
  /** What the snippet is: a command to run, a file's content, a program. */
  where: string;
  text: string;
  /** A link that installs the server in the client, where the client has one. */
  install?: { href: string; label: string } | undefined;
}

/** Whether mcp-remote needs `--allow-http` for this URL: plain http to anything but this machine. */
function needsAllowHttp(url: URL): boolean {
  return url.protocol === 'http:' && !['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
}

const json = (value: unknown) => JSON.stringify(value, null, 2);

/** The configurations for `mcpUrl`; `token` is the bearer (an agent token), or null for OAuth. */
export function clientConfigs(mcpUrl: string, token: string | null): ClientConfig[] {
  const url = new URL(mcpUrl);
  const bearer = token === null ? null : `Bearer ${token}`;
  const headers = bearer === null ? {} : { headers: { Authorization: bearer } };

  const remoteArgs = ['-y', 'mcp-remote', mcpUrl, ...(needsAllowHttp(url) ? ['--allow-http'] : [])];
  const desktop = {
    mcpServers: {
      [SERVER_NAME]:
        bearer === null
          ? { command: 'npx', args: remoteArgs }
          : { command: 'npx', args: [...remoteArgs, '--header', 'Authorization:${AUTH_HEADER}'], env: { AUTH_HEADER: bearer } },
    },
  };
  const cursorServer = { url: mcpUrl, ...headers };
  const vscodeServer = { name: SERVER_NAME, type: 'http', url: mcpUrl, ...headers };
  const pythonHeaders = bearer === null ? '' : `\n            "headers": {"Authorization": ${JSON.stringify(bearer)}},`;
  const tsHeaders = bearer === null ? '' : `, { requestInit: { headers: { Authorization: ${JSON.stringify(bearer)} } } }`;

  return [
    {
      id: 'config-claude-code',
      title: 'Claude Code',
      where: 'Run in a terminal:',
      text:
        `claude mcp add --transport http ${SERVER_NAME} ${mcpUrl}` + (bearer === null ? '' : ` \\\n  --header ${JSON.stringify(`Authorization: ${bearer}`)}`),
    },
    {
      id: 'config-claude-desktop',
      title: 'Claude Desktop (through mcp-remote)',
      where: 'In claude_desktop_config.json (Settings, Developer, Edit Config), then restart Claude Desktop:',
      text: json(desktop),
    },
    {
      id: 'config-cursor',
      title: 'Cursor',
      where: 'In .cursor/mcp.json or ~/.cursor/mcp.json:',
      text: json({ mcpServers: { [SERVER_NAME]: cursorServer } }),
      install: {
        href: `cursor://anysphere.cursor-deeplink/mcp/install?name=${SERVER_NAME}&config=${encodeURIComponent(Buffer.from(JSON.stringify(cursorServer)).toString('base64'))}`,
        label: 'Add to Cursor',
      },
    },
    {
      id: 'config-vscode',
      title: 'VS Code',
      where: 'Run in a terminal (or add the server to .vscode/mcp.json):',
      text: `code --add-mcp '${JSON.stringify(vscodeServer)}'`,
      install: { href: `vscode:mcp/install?${encodeURIComponent(JSON.stringify(vscodeServer))}`, label: 'Add to VS Code' },
    },
    {
      id: 'config-openai-agents',
      title: 'OpenAI Agents SDK (Python)',
      where: 'pip install openai-agents; it needs OPENAI_API_KEY for the model:',
      text: `import asyncio
from agents import Agent, Runner
from agents.mcp import MCPServerStreamableHttp

async def main() -> None:
    async with MCPServerStreamableHttp(
        name=${JSON.stringify(SERVER_NAME)},
        params={
            "url": ${JSON.stringify(mcpUrl)},${pythonHeaders}
        },
        cache_tools_list=False,  # the tool list follows the owner's grants
    ) as devices:
        agent = Agent(name="Home", instructions="Operate the user's devices.", mcp_servers=[devices])
        result = await Runner.run(agent, "List my devices.")
        print(result.final_output)

asyncio.run(main())`,
    },
    {
      id: 'config-typescript',
      title: 'MCP TypeScript SDK',
      where: 'npm install @modelcontextprotocol/client, then save as agent.mjs (an ES module) and run node agent.mjs:',
      text: `import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const client = new Client({ name: 'my-agent', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(${JSON.stringify(mcpUrl)})${tsHeaders}));
console.log((await client.listTools()).tools.map((tool) => tool.name));
await client.close();`,
    },
  ];
}

/** The MCP URL and every configuration, each with a copy button the page script reveals. */
export function ClientConfigs(props: { mcpUrl: string; token: string | null; urlOnly?: boolean }) {
  return (
    <section aria-labelledby="configs-heading" id="client-configs">
      <h3 id="configs-heading">Connect a client</h3>
      <p>
        MCP URL <code id="mcp-url">{props.mcpUrl}</code>{' '}
        <button type="button" hidden data-copy-target="mcp-url" data-copy-status="mcp-url-status" id="mcp-url-copy">
          Copy
        </button>{' '}
        <span id="mcp-url-status" role="status"></span>
      </p>
      {props.urlOnly ? null : props.token === null ? (
        <p class="muted">These configurations carry no token: the client signs in with OAuth and sends you to the consent page.</p>
      ) : (
        <p class="muted">These configurations carry the token: keep them out of files you share or commit.</p>
      )}
      {(props.urlOnly ? [] : clientConfigs(props.mcpUrl, props.token)).map((config) => (
        <details class="client-config" data-client={config.id}>
          <summary>{config.title}</summary>
          <p>{config.where}</p>
          <pre id={config.id}>{config.text}</pre>
          <p>
            <button type="button" hidden data-copy-target={config.id} data-copy-status={`${config.id}-status`} id={`${config.id}-copy`}>
              Copy
            </button>{' '}
            {config.install ? (
              <a class="button" href={config.install.href} id={`${config.id}-install`}>
                {config.install.label}
              </a>
            ) : null}{' '}
            <span id={`${config.id}-status`} role="status"></span>
          </p>
        </details>
      ))}
    </section>
  );
}
