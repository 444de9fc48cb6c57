import type { CallToolResult, InputRequiredResult, McpServer, ServerContext, ToolAnnotations } from '@modelcontextprotocol/server';
import type { CallableFunction } from '../domain/functions.js';
import { conditionsSentence, narrowSchema } from '../domain/grant-conditions.js';
import { advertised } from './advertised-schemas.js';
import { VIEW_TOOL_META } from './apps.js';
import { confirmedDeviceCall } from './confirmed-device-call.js';
import { deviceText, MAX_DESCRIPTION_CHARS, MAX_DEVICE_NAME_CHARS, placeOf } from './device-text.js';
import { callDeviceTool, type DeviceToolCall } from './device-tool-call.js';
import type { McpSession } from './session.js';

// ---------------------------------------------------------------------------------------
// Device tools as listed: one tool per callable function, its name from
// device-tool-names.ts, its description in the service's words with the device's quoted.
// ---------------------------------------------------------------------------------------

function describe(fn: CallableFunction): string {
  const kind = fn.kind === 'read' ? 'Read function (observes, changes nothing)' : 'Control function (changes the device)';
  // The service's words first; the device's description after them, marked as the device's
  // and quoted, so a model can tell the two apart.
  const text = fn.description ? deviceText(fn.description, MAX_DESCRIPTION_CHARS) : '';
  const what = text ? ` Device-supplied description: ${JSON.stringify(text)}.` : '';
  // Kept short: it is repeated in every device tool of a tools/list that may hold a
  // thousand of them; the server instructions and the operate_devices prompt say the rest.
  // The grant's schedule and budget in one sentence (docs/owners/grants.md "Conditions"); its argument bounds are in the inputSchema.
  const conditions = conditionsSentence(fn.conditions ?? null);
  return `${kind} "${fn.capability}" of ${placeOf(fn)}.${what}${APPROVAL_NOTES[fn.approval ?? 'none']}${conditions ? ` ${conditions}` : ''} Returns the Action after up to 10 s (follow an unfinished one with get_action), or with MCP Tasks a task after 1 s that the client follows to the end. To retry safely, set _meta "dfc/idempotencyKey".`;
}

/** What the tool description says of the grant's approval mode (docs/reference/rules.md "Approvals"). */
const APPROVAL_NOTES: Record<NonNullable<CallableFunction['approval']>, string> = {
  none: '',
  owner:
    " Needs the owner's approval: a call creates the action awaiting_approval and the device is asked only once the owner approves it; a plain call returns it awaiting_approval, a task waits for the owner's decision or the end of the approval window.",
  user: ' Your user is asked to confirm each call before the device is asked; your MCP client asks and answers, and this service cannot verify that a person did (docs/agents/confirmation.md).',
};

export function registerDeviceTool(server: McpServer, session: McpSession, name: string, fn: CallableFunction): void {
  // Only the hints whose value says something: the title is the tool's own, and
  // openWorldHint (true) and idempotentHint (false) are the protocol's defaults. Every byte
  // here is repeated in each device tool of a tools/list.
  const annotations: ToolAnnotations = fn.kind === 'read' ? { readOnlyHint: true } : { readOnlyHint: false, destructiveHint: true };
  server.registerTool(
    name,
    {
      title: `${fn.capability} · ${deviceText(fn.deviceName, MAX_DEVICE_NAME_CHARS)}`,
      description: describe(fn),
      // docs/reference/rules.md "MCP": the inputSchema is the capability's argument schema, narrowed by the grant's argument bounds.
      inputSchema: advertised(narrowSchema(fn.arguments, fn.conditions?.arguments)),
      annotations,
      // `ui`: the device view an MCP Apps host renders for its answer (apps.ts).
      _meta: { 'dfc/deviceId': fn.deviceId, 'dfc/capability': fn.capability, ...VIEW_TOOL_META },
    },
    (args: unknown, extra: ServerContext): Promise<CallToolResult | InputRequiredResult> => {
      const call: DeviceToolCall = {
        meta: extra.mcpReq._meta as Record<string, unknown> | undefined,
        id: extra.mcpReq.id,
        signal: extra.mcpReq.signal,
        notify: (notification) => extra.mcpReq.notify(notification),
      };
      // The mode is the live grant's, read by the gate for this very request (tool-call-gate.ts).
      const answer = fn.approval === 'user' ? confirmedDeviceCall(server, session, name, fn, args, call, extra) : callDeviceTool(session, fn, args, call);
      // The SDK (2.4) types a tool's answer without MCP Tasks, and passes a CreateTaskResult on as it is.
      return answer as Promise<CallToolResult | InputRequiredResult>;
    },
  );
}
