/**
 * The clients of `npm run soak` (scripts/soak.ts), each speaking only the public API: agents
 * over REST and over MCP (the official client SDK), devices on the wake socket (the device
 * SDK) and polling, an owner on the event stream, and webhook receivers. Each keeps its own
 * record of what the service acknowledged or handed it; the soak compares the records with
 * the service's state at the end. Every loop ends at its deadline and after a bounded number
 * of operations; every request has a timeout.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CommandError, Device, type DeviceCredentials, type Manifest } from '@dfc/device';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { openSse, type SseStream } from '../test/helpers/sse.js';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Requests answered within this or counted as lost (a killed instance never answers). */
const REQUEST_TIMEOUT_MS = 15_000;
/** No loop runs more operations than this, whatever the duration. */
const MAX_OPERATIONS_PER_LOOP = 1_000_000;

/** The instances that are up now; a client picks one per request, as a load balancer would. */
export interface Pool {
  /** A base URL of an instance that is up (or was, a moment ago). */
  pick(): string;
}

export const MANIFEST: Manifest = {
  capabilities: [
    {
      name: 'set_level',
      kind: 'control',
      description: 'Sets the output level.',
      arguments: {
        type: 'object',
        properties: { level: { type: 'integer', minimum: 0, maximum: 100 } },
        required: ['level'],
        additionalProperties: false,
      },
    },
  ],
};

/** What the agents were told: action id → how (REST 201 or an MCP result carrying the action). */
export type Acknowledged = Map<string, 'rest' | 'mcp'>;

/** What the devices were given: action id → how many times `next` handed it out. */
export type HandOuts = Map<string, number>;

export function countHandOut(handOuts: HandOuts, id: string): void {
  handOuts.set(id, (handOuts.get(id) ?? 0) + 1);
}

export interface JsonAnswer {
  status: number;
  /** `any`: the soak reads into answers the way a client does; its checks, not types, hold them to the contract. */
  body: any;
}

export async function call(
  base: string,
  method: 'GET' | 'POST',
  route: string,
  token: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<JsonAnswer> {
  const res = await fetch(`${base}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON (a proxy page, a cut connection): kept as text for the report.
  }
  return { status: res.status, body: parsed };
}

/** One loop's counters, for the report. */
export interface LoopStats {
  ok: number;
  failed: number;
}

/**
 * An agent over REST: requests an action, and while no answer says yes or no (a killed
 * instance, a 503 while the database restarts), retries the same request with the same
 * idempotency key on whatever instance is up, so an acknowledgement is never doubled.
 */
export async function restAgent(
  pool: Pool,
  token: string,
  deviceIds: string[],
  until: number,
  ttlSeconds: number,
  acked: Acknowledged,
  stats: LoopStats,
): Promise<void> {
  for (let n = 0; n < MAX_OPERATIONS_PER_LOOP && Date.now() < until; n += 1) {
    const deviceId = deviceIds[n % deviceIds.length]!;
    const body = { capability: 'set_level', arguments: { level: n % 101 }, ttlSeconds, idempotencyKey: randomUUID() };
    let done = false;
    for (let attempt = 0; attempt < 8 && !done && Date.now() < until + 10_000; attempt += 1) {
      try {
        const res = await call(pool.pick(), 'POST', `/v1/devices/${deviceId}/actions`, token, body);
        if (res.status === 201) {
          acked.set(res.body.data.id, 'rest');
          stats.ok += 1;
          done = true;
        } else if (res.status < 500 && res.status !== 429) {
          throw new Error(`POST actions answered ${res.status}: ${JSON.stringify(res.body)}`);
        }
      } catch (error) {
        if (error instanceof Error && error.message.startsWith('POST actions answered')) throw error;
      }
      if (!done) await sleep(250 * (attempt + 1));
    }
    if (!done) stats.failed += 1;
    await sleep(100);
  }
}

/**
 * An agent over MCP with the official client SDK (2026-07-28): calls a device tool, which
 * queues the action and waits for its result. Any answer carrying an action counts as
 * acknowledged. A call cut by a dying instance is not retried (an MCP tool call has no
 * idempotency key); the client connects again to an instance that is up.
 */
export async function mcpAgent(pool: Pool, token: string, deviceIds: string[], until: number, acked: Acknowledged, stats: LoopStats): Promise<void> {
  let client: Client | undefined;
  let tools = new Map<string, string>(); // device id → tool name
  for (let n = 0; n < MAX_OPERATIONS_PER_LOOP && Date.now() < until; n += 1) {
    try {
      if (!client) {
        const fresh = new Client({ name: 'dfc-soak', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
        await fresh.connect(
          new StreamableHTTPClientTransport(new URL(`${pool.pick()}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
        );
        client = fresh;
        const listed = await client.listTools(undefined, { timeout: REQUEST_TIMEOUT_MS });
        tools = new Map(
          listed.tools.filter((t) => t._meta?.['dfc/capability'] === 'set_level').map((t) => [String(t._meta?.['dfc/deviceId']), t.name] as [string, string]),
        );
      }
      const name = tools.get(deviceIds[n % deviceIds.length]!);
      if (!name) throw new Error('the device tool is not listed');
      const result = await client.callTool({ name, arguments: { level: n % 101 }, _meta: { 'dfc/waitSeconds': 5 } }, { timeout: REQUEST_TIMEOUT_MS });
      const action = result.structuredContent as { id?: unknown } | undefined;
      if (typeof action?.id === 'string') {
        acked.set(action.id, 'mcp');
        stats.ok += 1;
      } else {
        stats.failed += 1;
      }
    } catch {
      stats.failed += 1;
      await client?.close().catch(() => undefined);
      client = undefined;
      await sleep(500);
    }
    await sleep(100);
  }
  await client?.close().catch(() => undefined);
}

/** What a simulated device's handler does: mostly succeed, sometimes refuse, sometimes dawdle. */
async function work(args: { level: number }): Promise<unknown> {
  const roll = Math.random();
  if (roll < 0.1) throw new CommandError('refused', 'The device refused this level.');
  if (roll < 0.15) await sleep(300);
  return { level: args.level };
}

/**
 * A device on the wake socket, through the device SDK. Hand-outs are counted on the wire (a
 * `fetch` that reads every `next` answer), not by the SDK's events: the SDK itself does not
 * run a command twice, and the soak must see whether the service ever gave one twice.
 */
export function socketDevice(pool: Pool, credentials: DeviceCredentials, handOuts: HandOuts): Device {
  const counting: typeof fetch = async (input, init) => {
    const res = await fetch(input, { ...init, signal: init?.signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    if (res.ok && String(input instanceof Request ? input.url : input).endsWith('/next')) {
      const body = (await res.clone().json()) as { data: { id: string } | null };
      if (body.data) countHandOut(handOuts, body.data.id);
    }
    return res;
  };
  const device = new Device({
    url: () => pool.pick(),
    credentials,
    manifest: MANIFEST,
    fetch: counting,
    fallbackPollMs: 500,
    // A wake published while Redis restarts is lost (wakes are hints): the safety poll finds the command.
    idlePollMs: 3_000,
    backoff: { initialMs: 100, maxMs: 2_000 },
    silenceTimeoutMs: 20_000,
  });
  device.handle<{ level: number }>('set_level', (args) => work(args));
  return device;
}

/**
 * A device that only polls: `next` on any instance, then its result, retried on another
 * instance until the service answers it (200, or 409 when the action expired meanwhile).
 */
export async function pollingDevice(pool: Pool, credentials: DeviceCredentials, until: number, handOuts: HandOuts, stats: LoopStats): Promise<void> {
  const headers = { 'x-service-workspace': credentials.workspace };
  for (let n = 0; n < MAX_OPERATIONS_PER_LOOP && Date.now() < until; n += 1) {
    let command: { id: string; args: { level: number } } | null = null;
    try {
      const res = await call(pool.pick(), 'POST', `/v1/device/${credentials.deviceId}/next`, credentials.token, undefined, headers);
      if (res.status === 200) command = res.body.data;
    } catch {
      // A killed instance: poll again elsewhere.
    }
    if (!command) {
      await sleep(250);
      continue;
    }
    countHandOut(handOuts, command.id);
    let report: { ok: boolean; result?: unknown; error?: { code: string; message: string } };
    try {
      report = { ok: true, result: await work(command.args) };
    } catch (error) {
      report = { ok: false, error: { code: (error as CommandError).code, message: (error as Error).message } };
    }
    for (let attempt = 0; attempt < 10; attempt += 1) {
      const answered = await call(pool.pick(), 'POST', `/v1/device/${credentials.deviceId}/result`, credentials.token, {
        actionId: command.id,
        ...report,
      }).catch(() => undefined);
      if (answered && (answered.status === 200 || answered.status === 409)) {
        stats.ok += 1;
        break;
      }
      if (attempt === 9) stats.failed += 1;
      await sleep(300 * (attempt + 1));
    }
  }
}

/** How a webhook receiver answers: every delivery 2xx, or some refused, or some left hanging. */
export type ReceiverMood = 'steady' | 'flaky' | 'slow';

export interface Receiver {
  name: ReceiverMood;
  url: string;
  /** Event ids answered 2xx (each delivery's `webhook-id` → the event id in its body). */
  delivered: Map<string, string>;
  attempts: number;
  refused: number;
  hung: number;
  /** A `webhook-id` seen with two different events: the service's ids would be lying. */
  conflictingIds: number;
  close(): Promise<void>;
}

/**
 * A webhook endpoint on loopback. `flaky` answers 500 to one attempt in five; `slow` holds one
 * in ten past the service's timeout. Neither fails always, so neither should be disabled.
 */
export async function startReceiver(name: ReceiverMood, hangMs: number): Promise<Receiver> {
  const receiver: Omit<Receiver, 'url' | 'close'> = { name, delivered: new Map(), attempts: 0, refused: 0, hung: 0, conflictingIds: 0 };
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      receiver.attempts += 1;
      const roll = Math.random();
      if (name === 'flaky' && roll < 0.2) {
        receiver.refused += 1;
        res.writeHead(500).end();
        return;
      }
      if (name === 'slow' && roll < 0.1) {
        receiver.hung += 1;
        setTimeout(() => res.destroy(), hangMs).unref();
        return;
      }
      const webhookId = String(req.headers['webhook-id']);
      let eventId = '';
      try {
        eventId = String((JSON.parse(body) as { id: unknown }).id);
      } catch {
        res.writeHead(400).end();
        return;
      }
      const earlier = receiver.delivered.get(webhookId);
      if (earlier !== undefined && earlier !== eventId) receiver.conflictingIds += 1;
      receiver.delivered.set(webhookId, eventId);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${port}/hook`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

/** An event of the owner's stream, the workspace's journal. */
export interface JournalEvent {
  id: string;
  type: string;
  actionId?: string;
  status?: string;
}

export interface Journal {
  events: Map<string, JournalEvent>;
  lastId: string | undefined;
  /** `reset` events: the stream could not resume where it left off. */
  resets: number;
  reconnects: number;
  stop(): Promise<void>;
}

/**
 * The owner on `GET /v1/events`, reconnecting with `Last-Event-ID` to any instance that is
 * up whenever the stream breaks (an instance killed, the database restarting), so it ends
 * with every event of the workspace from its first connection on.
 */
export async function followJournal(pool: Pool, ownerToken: () => Promise<string>): Promise<Journal> {
  const journal: Journal = { events: new Map(), lastId: undefined, resets: 0, reconnects: 0, stop: async () => undefined };
  let running = true;
  let stream: SseStream | undefined;
  const open = async () => {
    const opened = await openSse(`${pool.pick()}/v1/events`, { token: await ownerToken(), ...(journal.lastId ? { lastEventId: journal.lastId } : {}) });
    if (opened.status !== 200) {
      opened.close();
      throw new Error(`GET /v1/events answered ${opened.status}`);
    }
    return opened;
  };
  stream = await open();
  const loop = (async () => {
    while (running) {
      try {
        stream ??= await open();
        const event = await stream.next(1_000);
        const parsed = JSON.parse(event.data) as { id: string; type: string; data?: { action?: { id: string; status: string } } };
        if (parsed.type === 'reset') journal.resets += 1;
        journal.events.set(parsed.id, { id: parsed.id, type: parsed.type, actionId: parsed.data?.action?.id, status: parsed.data?.action?.status });
        journal.lastId = parsed.id;
      } catch (error) {
        if (!running) break;
        if (stream && String((error as Error).message).startsWith('no event within')) continue;
        stream?.close();
        stream = undefined;
        journal.reconnects += 1;
        await sleep(300);
      }
    }
    stream?.close();
  })();
  journal.stop = async () => {
    running = false;
    await loop;
  };
  return journal;
}
