import path from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * OpenAI Agents (`@openai/agents-core`), the agent framework whose MCP adapter turns each MCP
 * tool into a function tool and, with `convertSchemasToStrict`, into a strict one (what the
 * OpenAI API's structured outputs need: closed objects, every property required). It is
 * installed in tools/interop by `npm run setup:dev-tools`, not by the root `npm ci`, so it is
 * loaded from there; the types below are the part of its API the tests use.
 */
const PACKAGE = path.resolve(import.meta.dirname, '../../tools/interop/node_modules/@openai/agents-core/dist/index.mjs');

export interface AgentsFunctionTool {
  type: 'function';
  name: string;
  strict: boolean;
  parameters: Record<string, unknown>;
  invoke(runContext: unknown, input: string): Promise<unknown>;
}

export interface AgentsMcpServer {
  connect(): Promise<void>;
  close(): Promise<void>;
}

interface AgentsCore {
  MCPServerStreamableHttp: new (options: { url: string; name?: string; requestInit?: RequestInit; logger?: unknown }) => AgentsMcpServer;
  getAllMcpTools(options: { mcpServers: AgentsMcpServer[]; convertSchemasToStrict?: boolean; runContext?: unknown }): Promise<AgentsFunctionTool[]>;
  RunContext: new (context?: unknown) => unknown;
}

export async function agentsCore(): Promise<AgentsCore> {
  return (await import(pathToFileURL(PACKAGE).href)) as AgentsCore;
}
