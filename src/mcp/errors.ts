import { ProtocolError, ProtocolErrorCode, ResourceNotFoundError, type CallToolResult } from '@modelcontextprotocol/server';
import type { OperationContext } from '../domain/context.js';
import { DomainError, fromStoreError } from '../domain/errors.js';
import { toHttpError } from '../http/errors.js';

/**
 * DomainError → MCP (docs/reference/rules.md "Envelopes"). Inside a tool call an error is a tool result with
 * `isError: true`, so the model can read it and react (MCP "Error handling": tool errors are
 * results, protocol errors are for the protocol). Its content is a text a model reads at once
 * and then, as the last text, the same error envelope REST answers, as JSON, so an agent sees
 * one shape on both surfaces. The envelope is `structuredContent` too only where no `outputSchema` says
 * otherwise (`structured`: the device tools): a fixed tool's `structuredContent` must match its
 * output schema, and clients that check it (SDK 1.x, the Inspector, LangChain) would throw the
 * real error away (docs/reference/rules.md "MCP"). The cases that must be HTTP statuses (401, the 403 of a
 * device tool, 503 of the kill switch) are decided in gate.ts and tool-call-gate.ts before the SDK runs; an error
 * reaching this point is a race (a grant revoked between the gate and the queueing
 * transaction) or an ordinary 4xx of the operation.
 */
export function toolError(error: unknown, ctx: OperationContext, { structured }: { structured: boolean }): CallToolResult {
  const mapped = toHttpError(error, ctx.requestId);
  if (mapped.internal) {
    ctx.log.error({
      msg: 'internal error',
      requestId: ctx.requestId,
      route: '/mcp',
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
    });
  }
  if (mapped.dependencyFailure) ctx.log.warn({ msg: 'dependency unavailable', requestId: ctx.requestId, route: '/mcp', error: mapped.dependencyFailure });
  const { code, message, issues } = mapped.body.error;
  const lines = [`Error ${code} (HTTP ${mapped.status}): ${message}`];
  for (const issue of issues ?? []) lines.push(`- ${issue.path}: ${issue.message}`);
  return {
    content: [
      { type: 'text', text: lines.join('\n') },
      { type: 'text', text: JSON.stringify(mapped.body, null, 2) },
    ],
    ...(structured ? { structuredContent: mapped.body } : {}),
    isError: true,
  };
}

/**
 * For resources/read. A resource the caller may not see is reported exactly like one that
 * does not exist (SEP-2164: -32602 with `data.uri`), so a URI never reveals another
 * principal's device or action. Other domain errors become an invalid-request error naming
 * their code; anything else is internal and logged, never echoed.
 */
export function resourceError(thrown: unknown, uri: string, ctx: OperationContext): Error {
  const error = fromStoreError(thrown);
  if (error instanceof DomainError) {
    if (error.code === 'not_found' || error.code === 'validation_failed' || error.code === 'grant_required') return new ResourceNotFoundError(uri);
    return new ProtocolError(ProtocolErrorCode.InvalidRequest, `${error.code}: ${error.message}`);
  }
  ctx.log.error({
    msg: 'internal error',
    requestId: ctx.requestId,
    route: '/mcp',
    error: error instanceof Error ? (error.stack ?? error.message) : String(error),
  });
  return new ProtocolError(ProtocolErrorCode.InternalError, `Internal error. Quote the request id ${ctx.requestId} when reporting it.`);
}
