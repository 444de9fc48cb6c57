import { CLIENT_CAPABILITIES_META_KEY, SERVER_INFO_META_KEY, SUBSCRIPTION_ID_META_KEY } from '@modelcontextprotocol/server';
import type { Context } from 'hono';
import type { OperationContext } from '../../domain/context.js';
import { DomainError } from '../../domain/errors.js';
import { openEventSink } from '../../http/event-sink.js';
import type { HttpEnv } from '../../http/request.js';
import type { ServerInfo } from '../direct-call.js';
import type { Admitted } from '../gate.js';
import { isObject, plainModernRequest } from '../modern-requests.js';
import { declaresTasks, missingTasksCapability } from '../tasks/task-methods.js';
import type { TaskClock } from '../tasks/task-view.js';
import { envelope } from '../refusals.js';
import type { ListenLimits, ListenSlots } from './slots.js';
import { MAX_STATE_RESOURCES } from './state-watch.js';
import { openSubscription, type Asked } from './subscription.js';

/**
 * `subscriptions/listen` (MCP 2026-07-28), answered here rather than by the SDK, whose listen
 * router serves one bus for every caller: what an agent is told depends on who it is. It may
 * ask for `notifications/tools/list_changed` (its callable tools changed) and, when it declares
 * MCP Tasks, `notifications/tasks` for its own task ids (docs/agents/tasks.md). Every listen
 * request with a modern envelope and routing headers that match it is answered here, whatever
 * else its `_meta` and params carry (ignored): one that is not, the SDK refuses (its envelope
 * and header errors), and its own listen router serves nothing (`maxSubscriptions: 0`,
 * sdk-answer.ts), so no stream escapes these caps, lifetime and revocation.
 */

/** The most task ids one subscription follows; ids past it are left out of the acknowledgement. */
export const MAX_LISTENED_TASKS = 100;
/**
 * The most distinct task ids of one listen request that are read at all: each is read while
 * the stream holds its slot, so a long list of ids that are not the caller's (only a body's
 * size long otherwise) costs no more than this. Ids past it are left out, as above.
 */
export const MAX_ASKED_TASKS = 2 * MAX_LISTENED_TASKS;

function rpcError(id: string | number, error: { code: number; message: string; data?: unknown }): Response {
  return Response.json({ jsonrpc: '2.0', id, error }, { status: 200 });
}

export function createListenAnswer(deps: { clock: TaskClock; serverInfo: (name: string) => ServerInfo; limits: ListenLimits; slots: ListenSlots }) {
  const { slots } = deps;
  return async (c: Context<HttpEnv>, ctx: OperationContext, request: Admitted): Promise<Response | undefined> => {
    if (!request.parsedOk) return undefined;
    const plain = plainModernRequest(c.req.raw.headers, request.parsed, 'subscriptions/listen', { paramKeys: 'any', metaKeys: 'any' });
    if (!plain) return undefined;
    const filter = plain.params.notifications;
    const taskIds = isObject(filter) ? filter.taskIds : undefined;
    const resources = isObject(filter) ? filter.resourceSubscriptions : undefined;
    const strings = (list: unknown) => list === undefined || (Array.isArray(list) && list.every((id) => typeof id === 'string'));
    if (!isObject(filter) || !strings(taskIds) || !strings(resources)) {
      return rpcError(plain.id, {
        code: -32602,
        message: "Invalid params: 'notifications' is required, and its taskIds and resourceSubscriptions must be strings",
      });
    }
    if (taskIds !== undefined && !declaresTasks(plain.meta[CLIENT_CAPABILITIES_META_KEY])) {
      const missing = missingTasksCapability();
      return rpcError(plain.id, { code: missing.code, message: missing.message, data: missing.data });
    }
    // Which of these are the caller's own is read once, by the stream (subscription.ts).
    const distinct = [...new Set((taskIds as string[] | undefined) ?? [])].slice(0, MAX_ASKED_TASKS);
    // Only `device://{deviceId}/state` resources notify (state-watch.ts); the others are left out of the acknowledgement.
    const resourceUris = [...new Set((resources as string[] | undefined) ?? [])].slice(0, 2 * MAX_STATE_RESOURCES);
    const asked: Asked = { toolsListChanged: filter.toolsListChanged === true, taskIds: distinct, resourceUris };
    const stamp = { [SUBSCRIPTION_ID_META_KEY]: plain.id };
    const closing = {
      jsonrpc: '2.0',
      id: plain.id,
      result: { resultType: 'complete', _meta: { ...stamp, [SERVER_INFO_META_KEY]: deps.serverInfo(ctx.settings.serviceName) } },
    };
    let release: () => void;
    try {
      release = slots.take(request.credential);
    } catch (error) {
      if (error instanceof DomainError) return envelope(c, error);
      throw error;
    }
    const { sink, response } = openEventSink(
      c,
      { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' },
      {
        maxBufferedBytes: deps.limits.maxBufferedBytes,
        // The client's doing, not a fault: news for the operator, without a stack.
        onCut: (bufferedBytes) => ctx.log.info({ msg: 'mcp subscription cut: its client did not read it', requestId: ctx.requestId, bufferedBytes }),
      },
    );
    openSubscription({
      ctx,
      credential: request.credential,
      asked,
      maxTasks: MAX_LISTENED_TASKS,
      maxAnswerBytes: deps.limits.maxAnswerBytes,
      clock: deps.clock,
      listenId: plain.id,
      stamp,
      closing,
      sink,
      lifetimeMs: deps.limits.maxLifetimeMs,
      release,
    });
    return response;
  };
}
