import { createHash } from 'node:crypto';
import {
  CLIENT_CAPABILITIES_META_KEY,
  fromJsonSchema,
  ProtocolError,
  ProtocolErrorCode,
  type CallToolResult,
  type ClientCapabilities,
  type InputRequiredResult,
  type jsonSchemaValidator,
  type JsonSchemaType,
  type ListToolsResult,
  type McpServer,
  type ProgressNotificationParams,
  type ServerContext,
  type ToolAnnotations,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { ActionRecord } from '../domain/action-records.js';
import { ACTION_STATES, ACTION_STATUSES, type ActionStatus } from '../domain/action-states.js';
import type { Context, CredentialOf } from '../domain/context.js';
import { withdrawAction } from '../domain/actions.js';
import { DomainError, fail } from '../domain/errors.js';
import { CHANGED_ELSEWHERE, watchAction, watchComingAction, type ComingActionWatch } from '../domain/events.js';
import { agentOf, authorizedFromListing, liveGrantId, type CallableFunction } from '../domain/functions.js';
import { call, invoke } from '../domain/invoke.js';
import type { AnyOperation, McpTool, OperationHints } from '../domain/operation.js';
import { PAGE_MAX } from '../domain/paging.js';
import { allOperations, operations } from '../domain/registry.js';
import { deviceForAgent, deviceText, functionForAgent, MAX_DESCRIPTION_CHARS, MAX_DEVICE_NAME_CHARS, quotedName } from './device-text.js';
import type { CallCancellation } from './cancellation.js';
import { canElicitForm, confirmationStep } from './confirmation.js';
import type { PromptRefusal } from './legacy-elicitation.js';
import { toolError } from './errors.js';

/** What the gate in handler.ts resolved for this request, handed to the per-request server. */
export interface McpSession {
  ctx: Context;
  credential: CredentialOf<'agent'>;
  /**
   * The caller's device tools, resolved by the gate: all of them for `tools/list`, only the
   * called one for a device `tools/call`, none for other methods (they never pay the query).
   */
  tools: DeviceTool[] | undefined;
  /** Tracks a device tool call by its JSON-RPC id while it runs (cancellation.ts). */
  cancellation: (id: string | number | undefined) => CallCancellation;
  /**
   * Every message of the request calls a device tool: its per-request server needs those
   * tools only. A 2025-era ask keeps that server while its user decides (legacy-elicitation.ts),
   * so what it does not register it does not hold.
   */
  deviceCallsOnly?: boolean;
  /** The protocol era of the per-request server, set when the SDK builds it. */
  era?: 'legacy' | 'modern';
  /**
   * On a 2025-era request: holds the per-request server as one waiting for its client's
   * answer to an elicitation, until the server closes (legacy-elicitation.ts); a refusal
   * when too many asks wait already.
   */
  awaitAnswer?: (server: McpServer) => PromptRefusal | undefined;
}

export interface DeviceTool {
  name: string;
  fn: CallableFunction;
}

// ---------------------------------------------------------------------------------------
// Tool names (docs/reference/rules.md "MCP"): ^[a-zA-Z0-9_-]{1,64}$, the alphabet every major LLM API
// accepts for a function name; containing the capability name where it fits, stable across
// calls and restarts, and unique per caller.
//
//   <stem>__<first 12 hex digits of the device id>      e.g. set_power__3f2c9a01b7e4
//
// - The stem is the capability name when it is in the alphabet. Capability names are
//   ^[a-z][a-z0-9_.-]{0,63}$, so only a dot falls outside: `scene.recall` becomes
//   `scene_recall_` plus 8 hex digits of SHA-256(capability), so it does not take the name of
//   a capability that really is `scene_recall` on the same device (a device that names one
//   `scene_recall_<those digits>` meets the last rule below), and its name depends on nothing
//   but the capability and the device.
// - The 12 hex digits are the first 48 random bits of the device's UUIDv4, so the name does
//   not depend on which other devices the caller can see: it is stable while grants change.
// - A stem longer than 50 characters keeps its first 41 and gets `_` plus 8 hex digits of
//   SHA-256(stem), so the name still fits 64.
// - If two of one caller's functions would still share a name (the same capability on two
//   devices whose ids share their first 48 bits: about one in 10^9 for 1,000 devices), both
//   use all 32 hex digits of their device id instead (stem budget 30).
// - A device chooses its capability names, so it can make two of them equal even then (two
//   long names with a common start and the same 8 hex digits of SHA-256: a birthday search of
//   about a second). Those functions are on one device; sorted by capability name, the first
//   keeps the name and each other one takes the first free `<stem>_<n>__<32 hex>` (n from
//   2). Such a name depends only on that device's colliding functions, so it is the same
//   whether computed from all the caller's functions or from one device's (a tools/call), and
//   no device can make tools/list fail.
// - Fixed tools have no `__`, so the two families can never collide.
// ---------------------------------------------------------------------------------------

export const DEVICE_TOOL_PATTERN = /^[a-z][a-z0-9_-]*__(?:[0-9a-f]{12}|[0-9a-f]{32})$/;

/**
 * The start of the device id a device tool name points at (`3f2c9a01-b7e4` for
 * `set_power__3f2c9a01b7e4`). Every function that could share the name has a device id with
 * the same start, so the caller's functions on those devices alone name it exactly as the
 * full list would: a tools/call needs only them, not all the caller's functions.
 */
export function deviceIdPrefixOf(toolName: string): string {
  const hex = toolName.slice(toolName.lastIndexOf('__') + 2, toolName.lastIndexOf('__') + 14);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}`;
}

const sha8 = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 8);

/** The capability name in the tool-name alphabet (see above). */
function stemOf(capability: string): string {
  return /^[a-zA-Z0-9_-]+$/.test(capability) ? capability : `${capability.replace(/[^a-zA-Z0-9_-]/g, '_')}_${sha8(capability)}`;
}

function fitCapability(capability: string, budget: number): string {
  const stem = stemOf(capability);
  if (stem.length <= budget) return stem;
  return `${stem.slice(0, budget - 9)}_${sha8(stem)}`;
}

function nameFor(fn: CallableFunction, idDigits: 12 | 32): string {
  const hex = fn.deviceId.replaceAll('-', '').toLowerCase();
  return `${fitCapability(fn.capability, 64 - 2 - idDigits)}__${hex.slice(0, idDigits)}`;
}

/** The caller's device tools in the order of `functions` (already deterministic: device, then manifest order). */
export function deviceToolNames(functions: readonly CallableFunction[]): DeviceTool[] {
  const short = functions.map((fn) => nameFor(fn, 12));
  const counts = new Map<string, number>();
  for (const name of short) counts.set(name, (counts.get(name) ?? 0) + 1);
  const names = functions.map((fn, index) => (counts.get(short[index]!)! > 1 ? nameFor(fn, 32) : short[index]!));

  const holders = new Map<string, number[]>();
  names.forEach((name, index) => holders.set(name, [...(holders.get(name) ?? []), index]));
  const taken = new Set(names);
  for (const indexes of holders.values()) {
    if (indexes.length < 2) continue;
    const byCapability = indexes.sort((a, b) => (functions[a]!.capability < functions[b]!.capability ? -1 : 1));
    for (const index of byCapability.slice(1)) {
      const fn = functions[index]!;
      const hex = fn.deviceId.replaceAll('-', '').toLowerCase();
      let candidate: string;
      for (let n = 2; ; n++) {
        const suffix = `_${n}`;
        candidate = `${fitCapability(fn.capability, 30 - suffix.length)}${suffix}__${hex}`;
        if (!taken.has(candidate)) break;
      }
      taken.add(candidate);
      names[index] = candidate;
    }
  }
  return functions.map((fn, index) => ({ name: names[index]!, fn }));
}

// ---------------------------------------------------------------------------------------
// Schemas. Validation of every call happens once, in `invoke` (zod) and in the action
// request (the capability's JSON Schema via the domain's compiled-once Ajv), with the same
// schemas and the same `issues` REST answers. So the SDK is given schemas to advertise only:
// its default validator would compile each schema with Ajv on every request (the server is
// built per request), which for 1,000 functions costs far more than the request itself.
// ---------------------------------------------------------------------------------------

const advertiseOnly: jsonSchemaValidator = {
  getValidator: () => (input) => ({ valid: true, data: input as never, errorMessage: undefined }),
};

function advertised(schema: Record<string, unknown>) {
  return fromJsonSchema(schema as JsonSchemaType, advertiseOnly);
}

/** JSON Schema of a zod schema, computed once per process (the zod schemas are constants). */
function once<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= make());
}

function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return compact(rest) as Record<string, unknown>;
}

/**
 * Shapes the JSON Schema zod emits for the fixed tools so every MCP client can use it:
 * - drops what says nothing to a client: the UUID regex beside `format: "uuid"` and the ±2^53
 *   bounds of every integer (most of a large tools/list);
 * - writes a nullable `type: [T, "null"]` as `anyOf: [{ type: T, … }, { type: "null" }]` and a
 *   free-form `additionalProperties: {}` as `true`: both are legal JSON Schema, but clients
 *   that map tool schemas onto a single-`type` dialect (the MCP Inspector's schema
 *   portability check names Gemini's function declarations) refuse or mishandle them.
 */
function compact(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(compact);
  if (typeof node !== 'object' || node === null) return node;
  const source = node as Record<string, unknown>;
  if (Array.isArray(source.type) && source.type.length === 2 && source.type.includes('null')) {
    const { type, description, title, default: fallback, ...rest } = source;
    const nonNull = (type as string[]).find((t) => t !== 'null');
    return compact({
      ...(title !== undefined ? { title } : {}),
      ...(description !== undefined ? { description } : {}),
      ...(fallback !== undefined ? { default: fallback } : {}),
      anyOf: [{ type: nonNull, ...rest }, { type: 'null' }],
    });
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source)) {
    if (key === 'pattern' && source.format === 'uuid') continue;
    if ((key === 'minimum' || key === 'maximum') && Math.abs(value as number) === Number.MAX_SAFE_INTEGER) continue;
    if (key === 'additionalProperties' && typeof value === 'object' && value !== null && Object.keys(value).length === 0) {
      out[key] = true;
      continue;
    }
    out[key] = compact(value);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Fixed tools: the registry operations that declare an MCP tool, each called through
// `invoke` with the operation's own input schema, so REST and MCP cannot drift apart. Name,
// title, description, annotations and schemas all come from the operation's descriptor.
// ---------------------------------------------------------------------------------------

type FixedTool = McpTool & { operation: AnyOperation };

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
        const input = jsonSchemaOf(tool.operation.input, 'input');
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

function jsonText(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

async function callFixedTool(tool: FixedTool, session: McpSession, args: unknown): Promise<CallToolResult> {
  const answer = await call(tool.operation, session.ctx, args ?? {}, PAGE_MAX);
  if (answer.kind === 'stream' || answer.kind === 'live') throw new Error(`operation ${tool.operation.name} streams its answer: it cannot be a fixed tool`);
  const clean = forAgent[tool.name];
  const data = clean && Array.isArray(answer.data) ? answer.data.map((item) => clean(item as never)) : answer.data;
  const next = answer.kind === 'page' ? answer.nextCursor : null;
  const structured = (tool.listKey ? { [tool.listKey]: data, ...(next !== null ? { nextCursor: next } : {}) } : data) as Record<string, unknown>;
  const content: CallToolResult['content'] = [{ type: 'text', text: jsonText(data) }];
  if (next !== null) {
    content.push({ type: 'text', text: `More ${tool.listKey} follow: call ${tool.name} again with { "cursor": ${JSON.stringify(next)} } for the next page.` });
  }
  return { content, structuredContent: structured };
}

function registerFixedTools(server: McpServer, session: McpSession): void {
  const schemas = fixedSchemas();
  // The kill switch hides what would only answer 503 (broadcast); reads stay (docs/reference/rules.md "MCP").
  const controls = session.ctx.settings.deviceControlsEnabled;
  for (const tool of fixedTools) {
    if (tool.operation.queuesDeviceActions && !controls) continue;
    const schema = schemas.get(tool.name)!;
    server.registerTool(
      tool.name,
      {
        title: tool.operation.title,
        description: tool.operation.description,
        inputSchema: advertised(schema.input),
        outputSchema: advertised(schema.output),
        annotations: annotationsOf(tool.operation.hints),
      },
      async (args: unknown): Promise<CallToolResult> => {
        try {
          return await callFixedTool(tool, session, args);
        } catch (error) {
          return toolError(error, session.ctx, { structured: false });
        }
      },
    );
  }
}

// ---------------------------------------------------------------------------------------
// Device tools.
// ---------------------------------------------------------------------------------------

export const DEFAULT_WAIT_MS = 10_000;
export const MAX_WAIT_MS = 60_000;
/** Request `_meta` key that sets how long a device tool call waits for the result, in seconds (0..60). */
export const WAIT_META_KEY = 'dfc/waitSeconds';
/** Request `_meta` key: the action request's `idempotencyKey` (docs/agents/idempotency.md). */
export const IDEMPOTENCY_META_KEY = 'dfc/idempotencyKey';
/** Request `_meta` key: the action request's `ttlSeconds` (1..300, default 30). */
export const TTL_META_KEY = 'dfc/ttlSeconds';

/** Progress is the action's stage counted from 1, out of as many as there are (awaiting_approval 1/4 → queued 2/4 → received 3/4 → done 4/4). */
const PROGRESS_TOTAL = Math.max(...ACTION_STATUSES.map((status) => ACTION_STATES[status].stage)) + 1;

/**
 * Where the device sits, in words: the description must name the device and its place. The
 * names are the device's own words, cleaned and quoted (device-text.ts).
 */
export function placeOf(fn: CallableFunction): string {
  const name = quotedName(fn.deviceName);
  const parent = fn.parentName !== null ? quotedName(fn.parentName) : 'its gateway';
  switch (fn.deviceKind) {
    case 'gateway':
      return `gateway ${name}`;
    case 'service':
      return `integration-wide service ${name} of gateway ${parent}`;
    default:
      return fn.parentId !== null ? `device ${name} behind gateway ${parent}` : `device ${name}`;
  }
}

function describe(fn: CallableFunction): string {
  const kind = fn.kind === 'read' ? 'Read function (observes, changes nothing)' : 'Control function (changes the device)';
  // The service's words first; the device's description after them, marked as the device's
  // and quoted, so a model can tell the two apart.
  const text = fn.description ? deviceText(fn.description, MAX_DESCRIPTION_CHARS) : '';
  const what = text ? ` Device-supplied description: ${JSON.stringify(text)}.` : '';
  // Kept short: it is repeated in every device tool of a tools/list that may hold a
  // thousand of them; the server instructions and the operate_devices prompt say the rest.
  return `${kind} "${fn.capability}" of ${placeOf(fn)}.${what}${APPROVAL_NOTES[fn.approval ?? 'none']} Returns the Action (waits up to 10 s; follow an unfinished one with get_action). To retry safely, set _meta "dfc/idempotencyKey".`;
}

/** What the tool description says of the grant's approval mode (docs/reference/rules.md "Approvals"). */
const APPROVAL_NOTES: Record<NonNullable<CallableFunction['approval']>, string> = {
  none: '',
  owner:
    " Needs the owner's approval: a call creates the action awaiting_approval and the device is asked only once the owner approves it (the answer may come back awaiting_approval; follow it with get_action).",
  user: ' Your user is asked to confirm each call before the device is asked; your MCP client asks and answers, and this service cannot verify that a person did (docs/agents/confirmation.md).',
};

/** The progress message of each status: what the call is waiting for, in words. */
const PROGRESS_MESSAGES: Partial<Record<ActionStatus, string>> = { awaiting_approval: "waiting for the owner's approval" };

function waitBound(meta: Record<string, unknown> | undefined): number {
  const value = meta?.[WAIT_META_KEY];
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return DEFAULT_WAIT_MS;
  return Math.min(value * 1000, MAX_WAIT_MS);
}

/**
 * What a device tool's answer says of each status, and whether it is an error result. A
 * Record over the statuses, so a new status cannot be added without deciding both.
 */
const OUTCOMES: Record<ActionStatus, { detail: (action: ActionRecord) => string | null; isError: boolean }> = {
  awaiting_approval: {
    detail: (action) =>
      `It waits for the owner's approval (until ${new Date(action.approval?.expiresAt ?? action.expiresAt).toISOString()}); the device is asked only once it is approved. ${unfinished(action)}`,
    isError: false,
  },
  queued: { detail: unfinished, isError: false },
  received: { detail: unfinished, isError: false },
  succeeded: { detail: (action) => `Result: ${JSON.stringify(action.result)}`, isError: false },
  failed: { detail: (action) => `Device error: ${action.error ? `${action.error.code}: ${action.error.message}` : 'unknown'}`, isError: true },
  rejected: { detail: (action) => `The owner rejected it${action.approval?.reason ? `: ${JSON.stringify(action.approval.reason)}` : '.'}`, isError: true },
  cancelled: { detail: () => null, isError: false },
  expired: {
    detail: (action) =>
      action.expiredReason === 'approval_timeout' ? 'Nobody approved it within its approval window.' : 'No result arrived before its deadline.',
    isError: true,
  },
};

function unfinished(action: ActionRecord): string {
  return `The wait ended first; follow it with get_action { "actionId": "${action.id}" } or read action://${action.id}.`;
}

function summary(fn: CallableFunction, action: ActionRecord): string {
  const head = `${fn.capability} on ${placeOf(fn)}: ${action.status} (action ${action.id}).`;
  const detail = OUTCOMES[action.status].detail(action);
  return detail === null ? head : `${head}\n${detail}`;
}

/**
 * Waits for the action to settle, up to `waitMs`, telling the client each state change as
 * progress (awaiting_approval 1/4 → queued 2/4 → received 3/4 → done 4/4) when it asked for
 * progress; an action approved during the wait is then waited for as any queued one. The
 * changes published here (each a full Action, in commit order) are the state. `coming` is a watch
 * begun before the call created `first`: it holds every change since, so `first` is the state
 * to start from. Otherwise (an idempotent replay answers an Action created earlier) it watches
 * the action's changes first and then reads its state once, so a change that lands between
 * the insert and the watch is in the read and none after it is missed. Aborting `signal`
 * (the client went away or cancelled) ends the wait; the caller then withdraws the action.
 */
async function awaitSettled(
  session: McpSession,
  first: ActionRecord,
  waitMs: number,
  signal: AbortSignal,
  progress: (action: ActionRecord) => Promise<void>,
  coming: ComingActionWatch | undefined,
): Promise<ActionRecord> {
  const { ctx } = session;
  const deadline = Date.now() + waitMs;
  const read = async () => (await invoke(operations.getAction, ctx, { actionId: first.id })) as ActionRecord;
  await progress(first);
  if (ACTION_STATES[first.status].terminal) return first;
  const changes = coming ? coming.of(first.id) : watchAction(ctx.events, first.id);
  // One deadline and one abort listener for the whole wait, however many changes it sees.
  const timer = setTimeout(() => changes.end(), Math.max(0, deadline - Date.now()));
  const onAbort = () => changes.end();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    let current = first;
    if (!coming) {
      current = await read();
      await progress(current);
    }
    while (!ACTION_STATES[current.status].terminal && !signal.aborted) {
      if (deadline - Date.now() <= 0) break;
      const change = await changes.next();
      if (!change) {
        // Timed out or aborted: one last read so the answer is the state as of now.
        if (!signal.aborted) current = await read();
        break;
      }
      // Another instance's change is a hint off the shared bus, forgeable by whoever can
      // publish there: the answer is the action as stored (docs/operators/scale-out-security.md).
      const seen = change === CHANGED_ELSEWHERE ? await read() : change;
      // A change published before the read can be older than what the read saw.
      if (ACTION_STATES[seen.status].stage < ACTION_STATES[current.status].stage) continue;
      current = seen;
      await progress(current);
    }
    return current;
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    changes.close();
  }
}

function registerDeviceTool(server: McpServer, session: McpSession, name: string, fn: CallableFunction): void {
  // Only the hints whose value says something: the title is the tool's own, and
  // openWorldHint (true) and idempotentHint (false) are the protocol's defaults. Every byte
  // here is repeated in each device tool of a tools/list.
  const annotations: ToolAnnotations = fn.kind === 'read' ? { readOnlyHint: true } : { readOnlyHint: false, destructiveHint: true };
  server.registerTool(
    name,
    {
      title: `${fn.capability} · ${deviceText(fn.deviceName, MAX_DEVICE_NAME_CHARS)}`,
      description: describe(fn),
      // docs/reference/rules.md "MCP": the inputSchema is the capability's argument schema, unchanged.
      inputSchema: advertised(fn.arguments),
      annotations,
      _meta: { 'dfc/deviceId': fn.deviceId, 'dfc/capability': fn.capability },
    },
    (args: unknown, extra: ServerContext): Promise<CallToolResult | InputRequiredResult> => {
      const call: DeviceToolCall = {
        meta: extra.mcpReq._meta as Record<string, unknown> | undefined,
        id: extra.mcpReq.id,
        signal: extra.mcpReq.signal,
        notify: (notification) => extra.mcpReq.notify(notification),
      };
      // The mode is the live grant's, read by the gate for this very request (handler.ts).
      return fn.approval === 'user' ? confirmedDeviceCall(server, session, name, fn, args, call, extra) : callDeviceTool(session, fn, args, call);
    },
  );
}

/**
 * A device tool call under a `user`-mode grant (docs/agents/confirmation.md): asks the agent's user
 * through its client first and queues the action only on a verified yes (confirmation.ts),
 * with the confirmation's id as its idempotency key and the grant it was asked under passed
 * to the domain as `userConfirmation`.
 */
async function confirmedDeviceCall(
  server: McpServer,
  session: McpSession,
  name: string,
  fn: CallableFunction,
  args: unknown,
  call: DeviceToolCall,
  extra: ServerContext,
): Promise<CallToolResult | InputRequiredResult> {
  const { ctx, credential } = session;
  const capabilities =
    session.era === 'modern'
      ? ((extra.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY] as ClientCapabilities | undefined)
      : server.server.getClientCapabilities();
  try {
    // A call that cannot run is not put to the user: its arguments are checked before the ask,
    // as the action request checks them again after it.
    if (extra.mcpReq.requestState() === undefined) {
      const issues = ctx.schemas.argumentIssues(JSON.stringify(fn.arguments), args ?? {});
      if (issues.length > 0) return toolError(fail.invalid('The arguments do not match the function schema.', issues), ctx, { structured: true });
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
      canElicit: canElicitForm(capabilities),
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

export interface DeviceToolCall {
  /** The request's `_meta`: its progress token, the wait bound, the idempotency key and the TTL. */
  meta: Record<string, unknown> | undefined;
  /** The call's JSON-RPC id, by which a 2025-era `notifications/cancelled` names it. */
  id: string | number | undefined;
  /** Aborts when the SDK ends the call; the client's own cancellation is the session's (cancellation.ts). */
  signal?: AbortSignal;
  /** Sends a notification on the request's stream; absent when the answer is plain JSON. */
  notify?: (notification: { method: 'notifications/progress'; params: ProgressNotificationParams }) => Promise<void>;
}

/** The `_meta` keys a device tool call passes to the action request, and the input field each one is. */
const ACTION_META = { [IDEMPOTENCY_META_KEY]: 'idempotencyKey', [TTL_META_KEY]: 'ttlSeconds' } as const;

/** The action request's options from `_meta`, checked by the operation with REST's rules. */
function actionOptions(meta: Record<string, unknown> | undefined): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(ACTION_META)) if (meta?.[key] !== undefined) options[field] = meta[key];
  return options;
}

/** A refused `_meta` value is reported where the caller wrote it, not as the operation's field. */
function atMetaKeys(error: unknown): unknown {
  if (!(error instanceof DomainError) || error.code !== 'validation_failed' || !error.details.issues) return error;
  const issues = error.details.issues.map((issue) => {
    const key = Object.entries(ACTION_META).find(([, field]) => issue.path === field)?.[0];
    return key ? { ...issue, path: `_meta.${key}` } : issue;
  });
  return new DomainError(error.code, error.message, { ...error.details, issues });
}

/**
 * A device tool's call: queues the action (through `invoke`, like REST: the same idempotency
 * and TTL rules, from `_meta`), waits for it to settle and answers the Action. Shared by the
 * tool registered on the SDK's server and by the direct path for plain calls (direct-call.ts),
 * so both answer the same result.
 *
 * A client that goes away or cancels before the answer is written withdraws its action
 * (docs/reference/rules.md "MCP"): a queued one is cancelled, a handed-out one recalled, both with
 * `client_cancelled`; a finished one stays as it is.
 */
export async function callDeviceTool(
  session: McpSession,
  fn: CallableFunction,
  args: unknown,
  call: DeviceToolCall,
  confirmed?: { idempotencyKey: string; grantId: string },
): Promise<CallToolResult> {
  const { ctx } = session;
  const { notify } = call;
  const cancellation = session.cancellation(call.id);
  const signal = call.signal ? AbortSignal.any([call.signal, cancellation.signal]) : cancellation.signal;
  const token = call.meta?.progressToken as string | number | undefined;
  let lastStatus: string | undefined;
  const progress = async (action: ActionRecord) => {
    if (token === undefined || !notify || action.status === lastStatus || signal.aborted) return;
    lastStatus = action.status;
    try {
      await notify({
        method: 'notifications/progress',
        params: {
          progressToken: token,
          progress: ACTION_STATES[action.status].stage + 1,
          total: PROGRESS_TOTAL,
          message: PROGRESS_MESSAGES[action.status] ?? action.status,
        },
      });
    } catch {
      // The client went away between the check and the send: the wait ends on the abort.
    }
  };
  // A call without an idempotency key always creates its action: watched from before the
  // insert, its changes need no read after it (awaitSettled). A key may replay an older Action.
  const coming =
    confirmed || call.meta?.[IDEMPOTENCY_META_KEY] !== undefined
      ? undefined
      : watchComingAction(ctx.events, session.credential.workspaceId, session.credential.principal);
  try {
    let queued: ActionRecord;
    try {
      // A confirmed call: the user said yes to exactly this one (a copy of the context, so
      // nothing else on this request is taken as confirmed), once (the idempotency key). Any
      // other call runs right after the gate found its function callable in this request, so
      // the action request need not read that access again (a copy of the context too); a
      // confirmed one may have waited minutes for the user, and reads afresh.
      const callable = confirmed ? undefined : authorizedFromListing(fn);
      const callCtx = confirmed ? { ...ctx, userConfirmation: { grantId: confirmed.grantId } } : callable ? { ...ctx, callable } : ctx;
      queued = (await invoke(operations.requestAction, callCtx, {
        deviceId: fn.deviceId,
        capability: fn.capability,
        arguments: args ?? {},
        ...actionOptions(call.meta),
        ...(confirmed ? { idempotencyKey: confirmed.idempotencyKey } : {}),
      })) as ActionRecord;
    } catch (error) {
      throw atMetaKeys(error);
    }
    const action = await awaitSettled(session, queued, waitBound(call.meta), signal, progress, coming);
    if (signal.aborted) {
      const withdrawn = await withdrawAction(ctx, session.credential.workspaceId, action.id, 'client_cancelled');
      ctx.log.info({ msg: 'mcp call cancelled by its client', requestId: ctx.requestId, actionId: action.id, withdrawn: withdrawn?.status ?? null });
    }
    return {
      content: [{ type: 'text', text: `${summary(fn, action)}\n${jsonText(action)}` }],
      structuredContent: action as unknown as Record<string, unknown>,
      ...(OUTCOMES[action.status].isError ? { isError: true } : {}),
    };
  } catch (error) {
    return toolError(error, ctx, { structured: true });
  } finally {
    // Stops keeping the principal's changes if the action was never created (a no-op once named).
    coming?.close();
    cancellation.release();
  }
}

/**
 * Registers the caller's tools on its per-request server: the fixed tools (unless the request
 * only calls device tools), and one tool per callable function when the gate loaded them
 * (tools/list, tools/call). The kill switch hides
 * every device tool (each runs `actions.request`, which answers 503 then, read functions
 * included, docs/reference/rules.md "Running") and the fixed tools that queue actions: tools/list shows
 * only what the caller may call now.
 */
export function registerTools(server: McpServer, session: McpSession): void {
  if (!session.deviceCallsOnly) {
    registerFixedTools(server, session);
    pageToolsList(server);
  }
  if (!session.tools || !session.ctx.settings.deviceControlsEnabled) return;
  for (const { name, fn } of session.tools) registerDeviceTool(server, session, name, fn);
}

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

function pageToolsList(server: McpServer): void {
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
