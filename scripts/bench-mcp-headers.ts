/** The MCP protocol revision the bench speaks, and the headers a 2026-07-28 request carries. */
export const MODERN = '2026-07-28';

export function mcpHeaders(token: string, method: string, name?: string): Record<string, string> {
  return {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
    ...(name !== undefined ? { 'mcp-name': name } : {}),
  };
}
