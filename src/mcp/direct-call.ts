import type { CallToolResult } from '@modelcontextprotocol/server';
import { headerDeclarations } from '../domain/argument-schemas.js';
import { isObject, plainModernRequest } from './modern-requests.js';
import { WAIT_META_KEY } from './action-wait.js';
import { IDEMPOTENCY_META_KEY, TTL_META_KEY } from './device-tool-call.js';
import type { TaskCreated } from './session.js';
import type { DeviceTool } from './device-tool-names.js';

/**
 * A plain call of a device tool, answered without building the SDK's per-request server.
 *
 * Why (`npm run bench`): a device tool's call is the hot path of every agent, and
 * the per-request server, its transport and their objects, which live as long as the call
 * waits for the device, cost about a third of an MCP round trip. The tool's work is the same
 * function the SDK's registered tool runs (`callDeviceTool`), so both answer the same result;
 * this module only recognises the request and wraps the result the way the SDK does for the
 * 2026-07-28 revision (`resultType`, the server's identity in `_meta`).
 *
 * Only a request the SDK would answer with that plain JSON result is eligible: one modern
 * `tools/call` with matching routing headers (Mcp-Name included), params of `name`,
 * `arguments` (an object, or none) and `_meta`, nothing in `_meta` but the protocol's
 * envelope and the action's options (wait bound, idempotency key, TTL), `Mcp-Param-*` headers
 * that agree with the arguments, and a name the gate already resolved to one of the caller's
 * device tools. A progress token (which needs an event stream), a function whose grant asks
 * the user to confirm, anything unexpected, and every 2025-era request go to the SDK.
 */
export interface DirectCall {
  id: string | number;
  tool: DeviceTool;
  args: Record<string, unknown> | undefined;
  meta: Record<string, unknown>;
}

type HeaderSource = Parameters<typeof plainModernRequest>[0];

export function directDeviceCall(headers: HeaderSource, message: unknown, tools: readonly DeviceTool[] | undefined): DirectCall | undefined {
  const request = plainModernRequest(headers, message, 'tools/call', {
    paramKeys: ['name', 'arguments'],
    metaKeys: [WAIT_META_KEY, IDEMPOTENCY_META_KEY, TTL_META_KEY],
    name: (params) => params.name,
  });
  if (!request) return undefined;
  const { name, arguments: args } = request.params;
  if (args !== undefined && !isObject(args)) return undefined;
  const tool = tools?.find((t) => t.name === name);
  // A call that needs its user's confirmation goes to the SDK, which carries the ask
  // (`input_required`) and the answer (docs/agents/confirmation.md "User confirmation").
  if (!tool || tool.fn.approval === 'user' || !paramHeadersAgree(tool.fn.arguments, args, headers)) return undefined;
  return { id: request.id, tool, args, meta: request.meta };
}

/**
 * A schema's header declarations, found once per schema object: a device tool's schema is the
 * object the call gate keeps for its device (call-gate-cache.ts), the same on every call until
 * the device's functions change, and walking it is the same work each time.
 */
const declarationsBySchema = new WeakMap<Record<string, unknown>, ReturnType<typeof headerDeclarations>>();
function declarationsOf(schema: Record<string, unknown>): ReturnType<typeof headerDeclarations> {
  let found = declarationsBySchema.get(schema);
  if (!found) {
    found = headerDeclarations(schema);
    declarationsBySchema.set(schema, found);
  }
  return found;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const DECIMAL = /^-?\d+(\.\d+)?$/;

/** An `Mcp-Param-*` value as sent: plain, or `=?base64?…?=` around UTF-8; undefined when that is broken. */
function decodeParam(value: string): string | undefined {
  if (!(value.startsWith('=?base64?') && value.endsWith('?='))) return value;
  const payload = value.slice(9, -2);
  if (!BASE64.test(payload)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(payload, 'base64'));
  } catch {
    return undefined;
  }
}

/**
 * The 2026-07-28 `Mcp-Param-*` check the SDK makes before a tool runs (docs/reference/rules.md "MCP"):
 * each argument the schema marks `x-mcp-header` that the body carries must come as its header
 * too, with the same value. The direct path takes a call only when they agree; any other call
 * goes to the SDK, which refuses it (400, -32020) as it refuses it on its own path, so both
 * give every request the same answer. A schema whose marks break the rules (stored before they
 * were checked at publish) goes to the SDK as well.
 */
function paramHeadersAgree(schema: Record<string, unknown>, args: Record<string, unknown> | undefined, headers: HeaderSource): boolean {
  const found = declarationsOf(schema);
  if ('issue' in found) return false;
  for (const { path, headerName, type } of found.declarations) {
    let body: unknown = args;
    for (const key of path) body = isObject(body) ? body[key] : undefined;
    if (body === undefined || body === null) continue;
    let expected: string;
    if (typeof body === 'string') expected = body;
    else if (typeof body === 'boolean') expected = String(body);
    else if (typeof body === 'number' && Number.isFinite(body) && (!Number.isInteger(body) || Number.isSafeInteger(body))) expected = String(body);
    else continue; // No header is expected for a value that has none.
    const sent = headers.get(`mcp-param-${headerName}`);
    const decoded = typeof sent === 'string' ? decodeParam(sent) : undefined;
    if (decoded === undefined) return false;
    const numeric = type === 'integer' && typeof body === 'number' && DECIMAL.test(decoded);
    if (numeric ? Number(decoded) !== body : decoded !== expected) return false;
  }
  return true;
}

export interface ServerInfo {
  name: string;
  title: string;
  version: string;
}

/**
 * The JSON-RPC answer the SDK gives a modern tools/call whose handler returned `result`; a
 * task (MCP Tasks) keeps its `resultType: "task"`.
 */
export function directAnswer(id: string | number, result: CallToolResult | TaskCreated, serverInfo: ServerInfo): Response {
  const meta = result._meta as Record<string, unknown> | undefined;
  const body = {
    result: { ...result, resultType: result.resultType ?? 'complete', _meta: { ...meta, 'io.modelcontextprotocol/serverInfo': serverInfo } },
    jsonrpc: '2.0',
    id,
  };
  return new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });
}
