import { type CallToolResult, type InputRequiredResult, type McpServer, type ServerContext } from '@modelcontextprotocol/server';
import { DomainError, fail } from '../domain/errors.js';
import { agentOf, liveGrantId, type CallableFunction } from '../domain/functions.js';
import { conditionsRefusal } from '../domain/grant-conditions.js';
import { canElicitForm, confirmationStep } from './confirmation.js';
import { placeOf } from './device-text.js';
import { callDeviceTool, type DeviceToolCall } from './device-tool-call.js';
import { toolError } from './errors.js';
import type { McpSession, TaskCreated } from './session.js';

/**
 * A device tool call under a `user`-mode grant (docs/agents/confirmation.md): asks the agent's user
 * through its client first and queues the action only on a verified yes (confirmation.ts),
 * with the confirmation's id as its idempotency key and the grant it was asked under passed
 * to the domain as `userConfirmation`.
 */
export async function confirmedDeviceCall(
  server: McpServer,
  session: McpSession,
  name: string,
  fn: CallableFunction,
  args: unknown,
  call: DeviceToolCall,
  extra: ServerContext,
): Promise<CallToolResult | InputRequiredResult | TaskCreated> {
  const { ctx, credential } = session;
  try {
    // A call that cannot run is not put to the user: its arguments are checked before the ask,
    // as the action request checks them again after it.
    if (extra.mcpReq.requestState() === undefined) {
      const issues = ctx.schemas.argumentIssues(JSON.stringify(fn.arguments), args ?? {});
      if (issues.length > 0) return toolError(fail.invalid('The arguments do not match the function schema.', issues), ctx, { structured: true });
      // Nor one the grant's conditions refuse (arguments, then schedule: docs/owners/grants.md "Conditions").
      const refused = conditionsRefusal(fn.conditions ?? null, (args ?? {}) as Record<string, unknown>, ctx.clock.now());
      if (refused) return toolError(refused, ctx, { structured: true });
    }
    const step = await confirmationStep({
      ctx,
      binding: {
        workspaceId: credential.workspaceId,
        principal: credential.principal,
        connectionId: credential.connectionId,
        tool: name,
        deviceId: fn.deviceId,
        capability: fn.capability,
        args,
      },
      // Marked, and never cut: an ask too long to show whole is refused (confirmation.ts).
      message: `Allow agent ${JSON.stringify(credential.principal)} to run "${fn.capability}" on ${placeOf(fn)}? Arguments: ${argumentsText(args)}`,
      // A 2026-07-28 request is asked whatever it declared: the SDK answers an ask the request
      // cannot take with -32021 (docs/agents/confirmation.md "The two MCP eras").
      mayAsk: session.era === 'modern' || canElicitForm(server.server.getClientCapabilities()),
      requestState: extra.mcpReq.requestState(),
      inputResponses: extra.mcpReq.inputResponses,
      // A 2025-era client answers in a POST of its own: this server waits for it there. A
      // 2026-07-28 answer is a retry of the call, and nothing waits.
      holdAsk: () => (session.era === 'legacy' && session.awaitAnswer ? session.awaitAnswer(server) : undefined),
      liveGrantId: async () => {
        const id = await liveGrantId(ctx.db, agentOf(credential), fn.deviceId, fn.capability, ctx.clock.now());
        if (id === undefined) throw new DomainError('grant_required', `Tool ${name} is not a device function you may call now: no live grant for it.`);
        return id;
      },
    });
    switch (step.kind) {
      case 'ask':
        if (session.era === 'modern') session.askedToConfirm = name;
        return step.result;
      case 'refused':
        return toolError(step.error, ctx, { structured: true });
      case 'confirmed':
        return callDeviceTool(session, fn, args, call, { idempotencyKey: step.idempotencyKey, grantId: step.grantId });
    }
  } catch (error) {
    return toolError(error, ctx, { structured: true });
  }
}

/** The arguments as the user reads them in the ask. */
function argumentsText(args: unknown): string {
  const text = JSON.stringify(args ?? {});
  return text === '{}' ? 'none' : text;
}
