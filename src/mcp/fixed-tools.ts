import type { CallToolResult, McpServer, ServerContext, ToolAnnotations } from '@modelcontextprotocol/server';
import type { ActionRecord } from '../domain/action-records.js';
import { ACTION_STATES } from '../domain/action-states.js';
import { listCallableFunctionsOnDevices } from '../domain/functions.js';
import { call } from '../domain/invoke.js';
import type { AnyOperation, McpTool, OperationHints } from '../domain/operation.js';
import { PAGE_MAX } from '../domain/paging.js';
import { allOperations } from '../domain/registry.js';
import { advertised, jsonSchemaOf, once } from './advertised-schemas.js';
import { VIEW_TOOL_META, viewResultMeta } from './apps.js';
import { deviceForAgent, functionForAgent } from './device-text.js';
import { toolError } from './errors.js';
import type { McpSession } from './session.js';

// ---------------------------------------------------------------------------------------
// Fixed tools: the registry operations that declare an MCP tool, each called through
// `invoke` with the operation's own input schema, so REST and MCP cannot drift apart. Name,
// title, description, annotations and schemas all come from the operation's descriptor.
// ---------------------------------------------------------------------------------------

type FixedTool = McpTool & { operation: AnyOperation };

/** Fixed tools whose answer is one Action that a client declaring MCP Tasks follows as its task (docs/agents/tasks.md). */
const TASK_TOOLS = new Set(['schedule_action']);

const fixedTools: FixedTool[] = allOperations.flatMap((operation) => (operation.mcp ? [{ ...operation.mcp, operation }] : []));

/** The registry operation behind a fixed tool, for the gate's checks before the SDK runs. */
export function fixedToolOperation(name: string): AnyOperation | undefined {
  return fixedTools.find((t) => t.name === name)?.operation;
}

/**
 * MCP tool annotations from an operation's hints. A read-only tool states only that and its
 * closed world; destructive and idempotent hints mean something only for one that changes things.
 */
function annotationsOf({ readOnly, destructive, idempotent, openWorld }: OperationHints): ToolAnnotations {
  return {
    readOnlyHint: readOnly,
    ...(readOnly ? {} : { destructiveHint: destructive ?? true }),
    ...(readOnly || idempotent === undefined ? {} : { idempotentHint: idempotent }),
    openWorldHint: openWorld ?? false,
  };
}

/**
 * A paged list's tool (`list_devices`, `list_functions`) pages as REST does, with the same
 * cursor: at most PAGE_MAX items an answer unless `limit` says fewer, and `nextCursor` when
 * more follow, to pass back as `cursor`. Without it an agent would see the first 1,000 and no
 * sign of the rest.
 */
const PAGE_INPUT = {
  limit: { type: 'integer', minimum: 1, maximum: PAGE_MAX, description: `Items per answer, 1 to ${PAGE_MAX}; ${PAGE_MAX} unless given.` },
  cursor: { type: 'string', minLength: 1, maxLength: 1024, description: 'Opaque: the `nextCursor` of the previous answer, for the next page.' },
};
const NEXT_CURSOR = { type: 'string', description: 'Present when more items follow: call the tool again with it as `cursor`.' };

const fixedSchemas = once(
  () =>
    new Map(
      fixedTools.map((tool) => {
        const input = jsonSchemaOf(tool.advertisedInput ?? tool.operation.input, 'input');
        const output = jsonSchemaOf(tool.operation.output, 'output');
        const paged = tool.operation.paged !== undefined;
        return [
          tool.name,
          {
            input: paged ? { ...input, properties: { ...(input.properties as object), ...PAGE_INPUT } } : input,
            output: tool.listKey
              ? { type: 'object', properties: { [tool.listKey]: output, ...(paged ? { nextCursor: NEXT_CURSOR } : {}) }, required: [tool.listKey] }
              : output,
          },
        ];
      }),
    ),
);

/**
 * What a list tool answers to an agent: the device's own words in it (names, descriptions)
 * cleaned as in tool descriptions (device-text.ts), so they cannot pass for the service's;
 * REST answers owners the data as published.
 */
const forAgent: Record<string, (item: never) => unknown> = { list_devices: deviceForAgent, list_functions: functionForAgent };

/** The fixed tools whose answer an MCP Apps host shows in the device view (apps.ts). */
const VIEW_TOOLS = new Set(['get_device_state']);

/**
 * What a device view needs in get_device_state's answer besides the state: the device's name,
 * read from the caller's own callable functions on that device (none found: no name, the view
 * says "Device").
 */
async function stateViewMeta(session: McpSession, deviceId: string): Promise<Record<string, unknown> | undefined> {
  const { ctx, credential } = session;
  const functions = await listCallableFunctionsOnDevices(ctx.db, credential, ctx.clock.now(), deviceId.slice(0, 13));
  const fn = functions.find((f) => f.deviceId === deviceId);
  return fn ? viewResultMeta({ deviceId, deviceName: fn.deviceName }) : undefined;
}

async function callFixedTool(tool: FixedTool, session: McpSession, args: unknown): Promise<CallToolResult> {
  const answer = await call(tool.operation, session.ctx, args ?? {}, PAGE_MAX);
  if (answer.kind === 'stream' || answer.kind === 'live') throw new Error(`operation ${tool.operation.name} streams its answer: it cannot be a fixed tool`);
  const clean = forAgent[tool.name];
  const data = clean && Array.isArray(answer.data) ? answer.data.map((item) => clean(item as never)) : answer.data;
  const next = answer.kind === 'page' ? answer.nextCursor : null;
  const structured = (tool.listKey ? { [tool.listKey]: data, ...(next !== null ? { nextCursor: next } : {}) } : data) as Record<string, unknown>;
  const content: CallToolResult['content'] = [{ type: 'text', text: JSON.stringify(data, null, 2) }];
  if (next !== null) {
    content.push({ type: 'text', text: `More ${tool.listKey} follow: call ${tool.name} again with { "cursor": ${JSON.stringify(next)} } for the next page.` });
  }
  const meta = VIEW_TOOLS.has(tool.name) ? await stateViewMeta(session, (data as { deviceId: string }).deviceId) : undefined;
  return { content, structuredContent: structured, ...(meta ? { _meta: meta } : {}) };
}

/** Whether the request may list what queues actions: neither the kill switch nor the workspace's pause is on. */
export function controlsOn(session: McpSession): boolean {
  return session.ctx.settings.deviceControlsEnabled && session.paused !== true;
}

export function registerFixedTools(server: McpServer, session: McpSession): void {
  const schemas = fixedSchemas();
  // The kill switch and the pause hide what would only answer 503 (broadcast); reads stay (docs/reference/rules.md "MCP").
  const controls = controlsOn(session);
  for (const tool of fixedTools) {
    if (tool.operation.queuesDeviceActions && !controls) continue;
    const schema = schemas.get(tool.name)!;
    server.registerTool(
      tool.name,
      {
        title: tool.operation.title,
        description: tool.operation.description,
        inputSchema: advertised(schema.input),
        // A call declaring MCP Tasks may answer with a task, which carries no structured content for the SDK to check.
        ...(session.taskFor && TASK_TOOLS.has(tool.name) ? {} : { outputSchema: advertised(schema.output) }),
        annotations: annotationsOf(tool.operation.hints),
        ...(VIEW_TOOLS.has(tool.name) ? { _meta: VIEW_TOOL_META } : {}),
      },
      async (args: unknown, extra: ServerContext): Promise<CallToolResult> => {
        try {
          const result = await callFixedTool(tool, session, args);
          // schedule_action on 2026-07-28, declaring MCP Tasks: the action's task, `working` until the action ends (tasks/).
          const taskFor = TASK_TOOLS.has(tool.name) ? session.taskFor?.(extra.mcpReq.id) : undefined;
          const action = result.structuredContent as unknown as ActionRecord;
          // The SDK (2.4) types a tool's answer without MCP Tasks, and passes a CreateTaskResult on as it is.
          if (taskFor && !ACTION_STATES[action.status].terminal) return (await taskFor(action)) as unknown as CallToolResult;
          return result;
        } catch (error) {
          return toolError(error, session.ctx, { structured: false });
        }
      },
    );
  }
}
