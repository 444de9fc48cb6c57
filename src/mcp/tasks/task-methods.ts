import {
  CLIENT_CAPABILITIES_META_KEY,
  PROTOCOL_VERSION_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  type McpServer,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import { ACTION_STATES } from '../../domain/action-states.js';
import type { ActionRecord } from '../../domain/action-records.js';
import { lastChangeOf, placeOfAction, readOwnAction, withdrawOwnAction } from '../../domain/agent-tasks.js';
import type { OperationContext, CredentialOf } from '../../domain/context.js';
import { isObject, MODERN_PROTOCOL_VERSION } from '../modern-requests.js';
import type { TaskMode } from '../session.js';
import { detailedTask, taskCreated, TASKS_EXTENSION, type TaskClock } from './task-view.js';

/**
 * tasks/get, tasks/update and tasks/cancel (MCP Tasks extension, docs/agents/tasks.md), on the
 * per-request server. Each request is checked on its own: it must declare the extension in its
 * own client capabilities (else -32021), and the task must be an action of the calling agent
 * connection (else -32602, the same answer as for an id that never existed, so a caller cannot
 * learn of another's task). The SDK has already checked that `Mcp-Name` equals the task id.
 */

/** Whether a request's client capabilities declare MCP Tasks. */
export function declaresTasks(capabilities: unknown): boolean {
  const extensions = isObject(capabilities) ? capabilities.extensions : undefined;
  return isObject(extensions) && isObject(extensions[TASKS_EXTENSION]);
}

export function missingTasksCapability(): ProtocolError {
  return new ProtocolError(
    ProtocolErrorCode.MissingRequiredClientCapability,
    `Missing required client capability: declare the ${TASKS_EXTENSION} extension in this request's client capabilities.`,
    { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
  );
}

const unknownTask = () => new ProtocolError(ProtocolErrorCode.InvalidParams, 'Failed to retrieve task: Task not found');

/** The caller's task as tasks/get answers it; undefined when it is not the caller's or not there. */
export async function readTask(
  ctx: OperationContext,
  credential: CredentialOf<'agent'>,
  taskId: string,
  clock: TaskClock,
): Promise<Record<string, unknown> | undefined> {
  const own = await readOwnAction(ctx, credential, taskId);
  return own && taskOf(ctx, credential, own.action, clock);
}

/** The task of an action known to be the caller's, as tasks/get answers it. */
export async function taskOf(
  ctx: OperationContext,
  credential: CredentialOf<'agent'>,
  action: ActionRecord,
  clock: TaskClock,
): Promise<Record<string, unknown>> {
  // Only a finished task carries the result, whose words name the device: one more read then.
  const place = ACTION_STATES[action.status].terminal ? await placeOfAction(ctx, credential.workspaceId, action) : undefined;
  return detailedTask(action, lastChangeOf(action), place, clock);
}

const taskParams = z.looseObject({ taskId: z.string().min(1).max(200) });
// The SDK hands `inputResponses` to the handler beside the params (it is also a 2026-07-28
// retry's field), so the params hold only the task id.
const updateParams = taskParams;

function assertDeclared(request: ServerContext): void {
  const envelope = request.mcpReq.envelope as Record<string, unknown> | undefined;
  if (!declaresTasks(envelope?.[CLIENT_CAPABILITIES_META_KEY])) throw missingTasksCapability();
}

export function registerTaskMethods(server: McpServer, session: { ctx: OperationContext; credential: CredentialOf<'agent'> }, clock: TaskClock): void {
  const { ctx, credential } = session;
  server.server.setRequestHandler('tasks/get', { params: taskParams }, async ({ taskId }, request) => {
    assertDeclared(request);
    const task = await readTask(ctx, credential, taskId, clock);
    if (!task) throw unknownTask();
    return task;
  });
  server.server.setRequestHandler('tasks/update', { params: updateParams }, async ({ taskId }, request) => {
    assertDeclared(request);
    // No task of this server waits for input (a confirmation is asked before the task exists),
    // so every response answers a key that is not outstanding: ignored, as the extension says.
    if (!(await readOwnAction(ctx, credential, taskId))) throw unknownTask();
    return {};
  });
  server.server.setRequestHandler('tasks/cancel', { params: taskParams }, async ({ taskId }, request) => {
    assertDeclared(request);
    // Queued or waiting: cancelled; handed out: recalled; finished: left as it is (an ack all the same).
    if (!(await withdrawOwnAction(ctx, credential, taskId))) throw unknownTask();
    return {};
  });
}

/**
 * How the request's device calls answer an unfinished action: with its task, for each
 * message that declared MCP Tasks in its own client capabilities (a 2026-07-28 tools/call),
 * decided per message, as a batch may mix clients; any other call answers as it always did.
 */
export function taskModeFor(messages: readonly unknown[], clock: TaskClock): TaskMode | undefined {
  const declaring = new Set<unknown>();
  for (const m of messages) {
    const meta = isObject(m) && m.method === 'tools/call' && isObject(m.params) ? m.params._meta : undefined;
    // Only a 2026-07-28 request (its envelope names the revision) can take a task for an answer.
    if (isObject(meta) && meta[PROTOCOL_VERSION_META_KEY] === MODERN_PROTOCOL_VERSION && declaresTasks(meta[CLIENT_CAPABILITIES_META_KEY])) {
      declaring.add(isObject(m) ? m.id : undefined);
    }
  }
  if (declaring.size === 0) return undefined;
  const asTask = async (action: ActionRecord) => taskCreated(action, lastChangeOf(action), clock);
  return (callId) => (declaring.has(callId) ? asTask : undefined);
}
