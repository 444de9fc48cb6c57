import type { CallToolResult } from '@modelcontextprotocol/server';
import { isObject, plainModernRequest } from './modern-requests.js';
import { WAIT_META_KEY, type DeviceTool } from './tools.js';

/**
 * A plain call of a device tool, answered without building the SDK's per-request server.
 *
 * Why (issue 8, `npm run bench`): a device tool's call is the hot path of every agent, and
 * the per-request server, its transport and their objects, which live as long as the call
 * waits for the device, cost about a third of an MCP round trip. The tool's work is the same
 * function the SDK's registered tool runs (`callDeviceTool`), so both answer the same result;
 * this module only recognises the request and wraps the result the way the SDK does for the
 * 2026-07-28 revision (`resultType`, the server's identity in `_meta`).
 *
 * Only a request the SDK would answer with that plain JSON result is eligible: one modern
 * `tools/call` with matching routing headers (Mcp-Name included), params of `name`,
 * `arguments` (an object, or none) and `_meta`, nothing in `_meta` but the protocol's
 * envelope and the wait bound, and a name the gate already resolved to one of the caller's
 * device tools. A progress token (which needs an event stream), anything unexpected, and
 * every 2025-era request go to the SDK.
 */
export interface DirectCall {
  id: string | number;
  tool: DeviceTool;
  args: Record<string, unknown> | undefined;
  meta: Record<string, unknown>;
}

export function directDeviceCall(
  headers: Parameters<typeof plainModernRequest>[0],
  message: unknown,
  tools: readonly DeviceTool[] | undefined,
): DirectCall | undefined {
  const request = plainModernRequest(headers, message, 'tools/call', {
    paramKeys: ['name', 'arguments'],
    metaKeys: [WAIT_META_KEY],
    name: (params) => params.name,
  });
  if (!request) return undefined;
  const { name, arguments: args } = request.params;
  if (args !== undefined && !isObject(args)) return undefined;
  const tool = tools?.find((t) => t.name === name);
  return tool && { id: request.id, tool, args, meta: request.meta };
}

export interface ServerInfo {
  name: string;
  title: string;
  version: string;
}

/** The JSON-RPC answer the SDK gives a modern tools/call whose handler returned `result`. */
export function directAnswer(id: string | number, result: CallToolResult, serverInfo: ServerInfo): Response {
  const body = {
    result: { ...result, resultType: 'complete', _meta: { ...result._meta, 'io.modelcontextprotocol/serverInfo': serverInfo } },
    jsonrpc: '2.0',
    id,
  };
  return new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });
}
