import net from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { grant, next, report } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { MODERN, toolName } from '../helpers/mcp-client.js';
import { useTestServer, type FileServer } from '../helpers/server.js';
import { declaringTasks, listen, listenRequest, postMcp } from '../helpers/tasks-client.js';

/**
 * A client that stops reading costs the service a bounded amount of memory, and a listen's
 * place is free only once its bytes are gone (docs/operators/security.md "Slow and silent
 * clients"). Raw sockets that never read a byte against a real server, with a write timeout
 * and answer bounds small enough for a test.
 */
const TASKS = { extensions: { 'io.modelcontextprotocol/tasks': {} } };
const acknowledged = (m: Record<string, any>) => m.method === 'notifications/subscriptions/acknowledged';

interface World {
  owner: string;
  lamp: AttachedDevice;
  agent: { token: string; principal: string };
}

async function world(server: FileServer, name: string): Promise<World> {
  const owner = await server.ownerToken(`owner-${name}`);
  const lamp = await attachDevice(server.api, owner, { name: `Lamp ${name}` });
  const agent = await createAgent(server.api, owner, { name, access: 'act', principal: `agent:${name}` });
  await grant(server.api, owner, agent.principal, lamp.id, ['set_power']);
  return { owner, lamp, agent };
}

/**
 * `count` tasks of the world's agent, each finished with `result`: a task's notification
 * carries its result twice (`structuredContent`, and escaped again in the text content).
 */
async function finishedTasks(server: FileServer, w: World, count: number, result: Record<string, unknown>): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await postMcp(server.url, w.agent.token, {
      method: 'tools/call',
      params: { name: toolName('set_power', w.lamp), arguments: { on: true }, _meta: declaringTasks({}, { 'dfc/waitSeconds': 0 }) },
    });
    expect(res.result?.resultType, JSON.stringify(res)).toBe('task');
    const taskId = res.result.taskId as string;
    expect((await next(server.api, w.lamp)).body.data.id).toBe(taskId);
    const reported = await report(server.api, w.lamp, { actionId: taskId, ok: true, result });
    expect(reported.status, JSON.stringify(reported.body)).toBe(200);
    ids.push(taskId);
  }
  return ids;
}

/** A listen request written to a socket of its own that never reads a byte of the answer. */
function silentListen(url: string, token: string, notifications: Record<string, unknown>): net.Socket {
  const { hostname, port } = new URL(url);
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 'silent',
    method: 'subscriptions/listen',
    params: { notifications, _meta: declaringTasks() },
  });
  const socket = net.connect(Number(port), hostname);
  socket.pause();
  socket.write(
    [
      'POST /mcp HTTP/1.1',
      `host: ${hostname}:${port}`,
      `authorization: Bearer ${token}`,
      'content-type: application/json',
      'accept: application/json, text/event-stream',
      `mcp-protocol-version: ${MODERN}`,
      'mcp-method: subscriptions/listen',
      'x-request-id: silent-listen',
      `content-length: ${Buffer.byteLength(body)}`,
      '',
      body,
    ].join('\r\n'),
  );
  return socket;
}

/** Waits until `probe` holds, polling: the server acts on its own time on a loaded machine. */
async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * A never-reading listen of `w`'s agent naming `taskIds` holds its connection's one place, is
 * closed by the server (the log says why: `closedBy`), and the place is then free for a new
 * listen; what the kernel had taken still reaches the client, without the listen's result.
 */
async function silentListenIsCut(server: FileServer, w: World, taskIds: string[], closedBy: string): Promise<void> {
  const silent = silentListen(server.url, w.agent.token, { taskIds, toolsListChanged: true });
  try {
    // The silent stream is answered (its request line is logged when its stream opens)…
    await eventually(
      async () => server.logs.find((line) => line.includes('"requestId":"silent-listen"') && line.includes('"status":200')),
      'the silent listen to be answered',
    );
    // …and holds the connection's one place while its bytes wait…
    const refused = await eventually(async () => {
      const res = await listenRequest(server.url, w.agent.token, { toolsListChanged: true });
      await res.body?.cancel();
      return res.status === 429 ? res : undefined;
    }, 'the silent listen to take its place');
    expect(refused.status).toBe(429);
    // …until the server closes its connection; then a new listen gets the place.
    const again = await eventually(async () => {
      const stream = await listen(server.url, w.agent.token, { toolsListChanged: true }, TASKS);
      if (stream.status === 200) return stream;
      stream.close();
      return undefined;
    }, 'the place to be free again');
    try {
      expect((await again.next(acknowledged)).params.notifications).toEqual({ toolsListChanged: true, taskIds: [] });
    } finally {
      again.close();
    }
    expect(server.logs.some((line) => line.includes(closedBy))).toBe(true);
    // What the kernel had already taken still reaches the client, then the end: the answer
    // was cut short, without the listen request's result.
    const received = await new Promise<string>((resolve) => {
      let text = '';
      silent.on('data', (chunk: Buffer) => void (text += chunk.toString('latin1')));
      silent.on('close', () => resolve(text));
      silent.on('error', () => resolve(text));
      silent.resume();
    });
    expect(received).toContain('notifications/subscriptions/acknowledged');
    expect(received).not.toContain('"id":"silent","result"');
  } finally {
    silent.destroy();
  }
}

describe('a listen whose client never reads is cut at the write timeout', () => {
  // A listen answer large enough to fill what the kernel buffers for a socket (about 4 MB on
  // loopback): 100 tasks whose notifications are about 48 KB each.
  const server = useTestServer({
    env: { MCP_LISTEN_PER_CONNECTION: '1', WRITE_TIMEOUT_SECONDS: '1', MCP_LISTEN_MAX_ANSWER_KIB: '16384', WORKSPACE_MAX_ACTION_BYTES: '100000000' },
  });
  let w: World;
  let taskIds: string[];
  beforeAll(async () => {
    w = await world(server, 'silent-reader');
    taskIds = await finishedTasks(server, w, 100, { quotes: '"'.repeat(8000) });
  }, 120_000);

  it('closes the connection, and the stream’s place is free for a new listen', async () => {
    await silentListenIsCut(server, w, taskIds, 'its client took no bytes within the write timeout');
  });
});

describe('one listen answer is bounded in bytes', () => {
  // 64 KiB of task notifications per stream; each finished task here tells about 12 KB.
  const server = useTestServer({ env: { MCP_LISTEN_MAX_ANSWER_KIB: '64' } });
  let w: World;
  let taskIds: string[];
  beforeAll(async () => {
    w = await world(server, 'answer-bound');
    taskIds = await finishedTasks(server, w, 10, { quotes: '"'.repeat(2000) });
  }, 60_000);

  it('leaves finished tasks past the bound out of the acknowledgement, in the order named', async () => {
    const stream = await listen(server.url, w.agent.token, { taskIds }, TASKS);
    try {
      const ack = await stream.next(acknowledged);
      const followed = ack.params.notifications.taskIds as string[];
      expect(followed.length).toBeGreaterThan(0);
      expect(followed.length).toBeLessThan(taskIds.length);
      expect(followed).toEqual(taskIds.slice(0, followed.length));
      // Each one followed is told, and the stream ends with the listen request's result.
      for (const id of followed)
        expect((await stream.next((m) => m.method === 'notifications/tasks')).params).toMatchObject({ taskId: id, status: 'completed' });
      expect((await stream.next((m) => m.id === 'listen-1')).result).toMatchObject({ resultType: 'complete' });
      await stream.ended;
    } finally {
      stream.close();
    }
    // A task left out is read whole with tasks/get.
    const left = taskIds.at(-1)!;
    const task = await postMcp(server.url, w.agent.token, { method: 'tasks/get', params: { taskId: left, _meta: declaringTasks() } });
    expect(task.result).toMatchObject({ taskId: left, status: 'completed' });
  });
});
