import { ProtocolError, ProtocolErrorCode, type ListToolsResult, type McpServer } from '@modelcontextprotocol/server';

// ---------------------------------------------------------------------------------------
// tools/list pages: one answer used to hold every tool the caller may call (485 KB for
// 1,205 tools). At most TOOLS_PAGE_SIZE tools per page, in the list's order
// (fixed tools first, so they are on the first page); `nextCursor` names the next page. A
// cursor is opaque to clients: base64url of `tools:<offset>`, and one this server did not
// make, or past the end of the caller's list, is -32602. A list that changes between pages
// may shift by the change, as any offset does: MCP clients re-list on a change anyway.
// ---------------------------------------------------------------------------------------

export const TOOLS_PAGE_SIZE = 200;

function pageCursor(offset: number): string {
  return Buffer.from(`tools:${offset}`).toString('base64url');
}

function pageOffset(cursor: string | undefined, total: number): number {
  if (cursor === undefined) return 0;
  const match = /^tools:([1-9][0-9]{0,8})$/.exec(Buffer.from(cursor, 'base64url').toString());
  const offset = match ? Number(match[1]) : NaN;
  if (offset % TOOLS_PAGE_SIZE !== 0 || offset >= total || pageCursor(offset) !== cursor) {
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid cursor: use the nextCursor of a tools/list answer, or none for the first page.');
  }
  return offset;
}

type ToolsListHandler = (request: unknown, ctx: unknown) => Promise<{ tools: unknown[] }>;

export function pageToolsList(server: McpServer): void {
  // The SDK (2.4) answers tools/list with every registered tool and has no paging of its
  // own; its handler still builds the definitions (schemas converted as it would), and this
  // cuts its answer into pages. `_getRequestHandler` is the SDK's protected accessor for it.
  const sdk = server.server as unknown as { _getRequestHandler(method: string): ToolsListHandler | undefined };
  const listAll = sdk._getRequestHandler('tools/list')!;
  server.server.setRequestHandler('tools/list', async (request, ctx) => {
    const { tools } = await listAll(request, ctx);
    const offset = pageOffset(request.params?.cursor, tools.length);
    const end = offset + TOOLS_PAGE_SIZE;
    return { tools: tools.slice(offset, end), ...(end < tools.length ? { nextCursor: pageCursor(end) } : {}) } as ListToolsResult;
  });
}
