import type { McpServer } from '@modelcontextprotocol/server';
import { registerDeviceTool } from './device-tools.js';
import { controlsOn, registerFixedTools } from './fixed-tools.js';
import type { McpSession } from './session.js';
import { pageToolsList } from './tools-list-pages.js';

/**
 * Registers the caller's tools on its per-request server: the fixed tools (unless the request
 * only calls device tools), and one tool per callable function when the gate loaded them
 * (tools/list, tools/call). The kill switch and the workspace's pause switch hide every
 * device tool (each runs `actions.request`, which answers 503 then, read functions included,
 * docs/reference/rules.md "Running") and the fixed tools that queue actions: tools/list shows
 * only what the caller may call now.
 */
export function registerTools(server: McpServer, session: McpSession): void {
  if (!session.deviceCallsOnly) {
    registerFixedTools(server, session);
    pageToolsList(server);
  }
  if (!session.tools || !controlsOn(session)) return;
  for (const { name, fn } of session.tools) registerDeviceTool(server, session, name, fn);
}
