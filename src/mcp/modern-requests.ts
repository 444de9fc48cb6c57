/**
 * Recognises the plainest kind of 2026-07-28 request: one JSON-RPC request of a given method
 * whose routing headers match its body and whose `_meta` holds only keys this server knows.
 * Two hot paths answer such requests without building the SDK's per-request server: the
 * cached tools/list (tools-list-cache.ts) and a device tool's call (direct-call.ts). Anything
 * else, and every 2025-era request, goes to the SDK, which answers it (or its protocol
 * error) itself.
 */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';
const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
const CLIENT_INFO_KEY = 'io.modelcontextprotocol/clientInfo';
const ENVELOPE_KEYS = [VERSION_KEY, CAPABILITIES_KEY, CLIENT_INFO_KEY];

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

export interface PlainRequest {
  id: string | number;
  params: Record<string, unknown>;
  meta: Record<string, unknown>;
}

/**
 * The request's id, params and `_meta` when `message` is a plain modern `method` request:
 * params limited to `paramKeys` (plus `_meta`), `_meta` limited to the protocol's envelope
 * (version, client capabilities, client info) plus `metaKeys`, and the MCP-Protocol-Version,
 * Mcp-Method and (when `name` is given) Mcp-Name headers equal to what the body says.
 * `'any'` lets other keys through, ignored (a path that must answer every such request).
 */
export function plainModernRequest(
  headers: { get(name: string): string | null | undefined },
  message: unknown,
  method: string,
  options: { paramKeys?: readonly string[] | 'any'; metaKeys?: readonly string[] | 'any'; name?: (params: Record<string, unknown>) => unknown } = {},
): PlainRequest | undefined {
  if (!isObject(message) || message.jsonrpc !== '2.0' || message.method !== method) return undefined;
  const { id, params } = message;
  if (!(typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)))) return undefined;
  if (Object.keys(message).some((key) => !['jsonrpc', 'id', 'method', 'params'].includes(key))) return undefined;
  const paramKeys = options.paramKeys ?? [];
  if (!isObject(params) || (paramKeys !== 'any' && Object.keys(params).some((key) => key !== '_meta' && !paramKeys.includes(key)))) return undefined;
  const meta = params._meta;
  const metaKeys = options.metaKeys ?? [];
  if (!isObject(meta) || (metaKeys !== 'any' && Object.keys(meta).some((key) => !ENVELOPE_KEYS.includes(key) && !metaKeys.includes(key)))) return undefined;
  if (meta[VERSION_KEY] !== MODERN_PROTOCOL_VERSION || !isObject(meta[CAPABILITIES_KEY])) return undefined;
  const info = meta[CLIENT_INFO_KEY];
  if (info !== undefined && !(isObject(info) && typeof info.name === 'string' && typeof info.version === 'string')) return undefined;
  if (headers.get('mcp-protocol-version') !== MODERN_PROTOCOL_VERSION || headers.get('mcp-method') !== method) return undefined;
  if (options.name && headers.get('mcp-name') !== options.name(params)) return undefined;
  return { id, params, meta };
}
