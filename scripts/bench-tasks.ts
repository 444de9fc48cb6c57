/**
 * The MCP Tasks figures of `npm run bench` (docs/agents/tasks.md): a task-mode round trip,
 * `tools/call` declaring the extension with `dfc/waitSeconds` 0 (so it answers a task at once)
 * → `subscriptions/listen` for that task → the device runs it → `notifications/tasks` with the
 * completed task; and `tasks/get` against `get_action` for one finished action, one request at
 * a time. The bench reports each beside its baseline measured in the same run.
 */
import { request, type Dispatcher } from 'undici';
import { MODERN, mcpHeaders } from './bench-mcp-headers.js';

const TASKS_META = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};
let id = 0;

async function post(dispatcher: Dispatcher, base: string, token: string, method: string, params: Record<string, unknown>, name?: string): Promise<any> {
  const response = await request(`${base}/mcp`, {
    method: 'POST',
    dispatcher,
    headers: mcpHeaders(token, method, name),
    body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params: { ...params, _meta: { ...TASKS_META, ...(params._meta as object) } } }),
  });
  const text = await response.body.text();
  const message = response.headers['content-type']?.includes('text/event-stream')
    ? JSON.parse(
        text
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .at(-1)!
          .slice(5),
      )
    : JSON.parse(text);
  if (message.error) throw new Error(`${method}: ${JSON.stringify(message.error)}`);
  return message.result;
}

/** Reads a subscriptions/listen stream until the task has finished and the stream has ended. */
async function awaitFinished(dispatcher: Dispatcher, base: string, token: string, taskId: string): Promise<Record<string, any>> {
  const listenId = ++id;
  let finished: Record<string, any> | undefined;
  let answered = false;
  const response = await request(`${base}/mcp`, {
    method: 'POST',
    dispatcher,
    headers: mcpHeaders(token, 'subscriptions/listen'),
    body: JSON.stringify({ jsonrpc: '2.0', id: listenId, method: 'subscriptions/listen', params: { notifications: { taskIds: [taskId] }, _meta: TASKS_META } }),
  });
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of response.body) {
      buffer += decoder.decode(chunk as Buffer, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = frame.split('\n').find((l) => l.startsWith('data:'));
        const message = data ? JSON.parse(data.slice(5)) : undefined;
        if (message?.method === 'notifications/tasks' && ['completed', 'cancelled', 'failed'].includes(message.params.status)) finished = message.params;
        // A stream whose tasks have all finished ends with the listen request's result: read
        // it and the end of the stream, as a client does, so the connection serves the next request.
        if (message?.id === listenId) answered = true;
      }
    }
  } finally {
    if (!answered) response.body.destroy();
  }
  if (finished) return finished;
  throw new Error(`the subscription for task ${taskId} ended before the task finished`);
}

/** One task-mode round trip: the call answers a task, the agent listens until it completes. */
export async function taskRoundTrip(dispatcher: Dispatcher, base: string, token: string, tool: string, args: Record<string, unknown>): Promise<string> {
  const created = await post(dispatcher, base, token, 'tools/call', { name: tool, arguments: args, _meta: { 'dfc/waitSeconds': 0 } }, tool);
  const task = created.resultType === 'task' ? await awaitFinished(dispatcher, base, token, created.taskId) : { status: 'completed', result: created };
  if (task.status !== 'completed' || task.result.structuredContent.status !== 'succeeded') throw new Error(`MCP task round trip ended ${task.status}`);
  return task.result.structuredContent.id as string;
}

/** `tasks/get` and `get_action` for the same finished action, `count` of each, one at a time: p50 of each. */
export async function taskGetAgainstGetAction(dispatcher: Dispatcher, base: string, token: string, actionId: string, count: number) {
  const time = async (run: () => Promise<unknown>) => {
    const samples: number[] = [];
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      await run();
      samples.push(performance.now() - t0);
    }
    return samples.sort((a, b) => a - b)[Math.floor(samples.length / 2)]!;
  };
  const getAction = await time(() => post(dispatcher, base, token, 'tools/call', { name: 'get_action', arguments: { actionId } }, 'get_action'));
  const tasksGet = await time(() => post(dispatcher, base, token, 'tasks/get', { taskId: actionId }, actionId));
  return {
    count,
    tasksGetP50Ms: Math.round(tasksGet * 100) / 100,
    getActionP50Ms: Math.round(getAction * 100) / 100,
    ratio: Math.round((tasksGet / getAction) * 100) / 100,
  };
}
