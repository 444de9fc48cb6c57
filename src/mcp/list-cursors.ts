import { ProtocolError, ProtocolErrorCode, type McpServer } from '@modelcontextprotocol/server';

/**
 * The lists this server answers whole, in one page: it never hands out a `nextCursor` for
 * them, so any cursor a client sends is not one of this server's. MCP says an invalid cursor
 * is -32602; the SDK (2.4) ignores the cursor and answers the whole list again, which a client
 * paging with a stale or forged cursor would take for the next page.
 */
const UNPAGED_LISTS = ['resources/list', 'resources/templates/list', 'prompts/list'] as const;

type ListHandler = (request: { params?: { cursor?: unknown } }, ctx: unknown) => Promise<unknown>;

export function refuseListCursors(server: McpServer): void {
  // `_getRequestHandler` is the SDK's protected accessor for the handler it registered.
  const sdk = server.server as unknown as { _getRequestHandler(method: string): ListHandler | undefined };
  for (const method of UNPAGED_LISTS) {
    const answer = sdk._getRequestHandler(method);
    if (!answer) continue;
    server.server.setRequestHandler(method, (async (request: Parameters<ListHandler>[0], ctx: unknown) => {
      if (request.params?.cursor !== undefined) {
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid cursor: ${method} answers the whole list in one page, so it takes no cursor.`);
      }
      return answer(request, ctx);
    }) as never);
  }
}
