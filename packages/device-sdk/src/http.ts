/**
 * The device side of the HTTP API (docs/reference/rules.md "Devices" and "Actions"): plain `fetch`, typed
 * answers, one error type (and its subclass for answers the SDK cannot use). Every request has a
 * deadline, reads a bounded answer and follows no redirect. Used by the Device class; usable on its own.
 */

/** A base URL, or a function that returns the current one (a service that moved, a test restart). */
export type UrlSource = string | (() => string | Promise<string>);

export interface DeviceCredentials {
  deviceId: string;
  /** The device child credential (`dfc_device_…`): keep it secret, never log it. */
  token: string;
  /** The 64-hex workspace routing id sent as `x-service-workspace`. */
  workspace: string;
}

export interface Capability {
  name: string;
  kind: 'read' | 'control';
  description?: string;
  /** JSON Schema of the arguments object. */
  arguments: Record<string, unknown>;
  /** JSON Schema of the result object its handler returns; a read function's result is its last-known value. */
  result?: Record<string, unknown>;
}

export interface ChildManifest {
  /** Stable per child: the service keeps the child's device id for the same key. */
  key: string;
  name: string;
  kind: 'device' | 'service';
  capabilities: Capability[];
}

export interface Manifest {
  capabilities: Capability[];
  children?: ChildManifest[];
}

export interface DeviceRecord {
  id: string;
  name: string;
  kind: 'device' | 'gateway' | 'service';
  parentId: string | null;
  /** A gateway child's manifest key; null for attached devices. */
  key: string | null;
  capabilities: Capability[];
  [field: string]: unknown;
}

/** A command handed to the device by `next` (docs/reference/rules.md "Actions"). */
export interface DeviceCommand {
  id: string;
  /** Which device runs it: this device, or one of its gateway children. */
  deviceId: string;
  capability: string;
  args: Record<string, unknown>;
  status: string;
  createdAt: number;
  expiresAt: number;
  dispatchedAt: number;
}

export type ResultReport = { ok: true; result?: unknown } | { ok: false; error: { code: string; message: string } };

/** A non-2xx answer, or no answer at all (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  /** Worth trying again later: no answer, a timeout, a rate limit or a server-side failure. */
  get retryable(): boolean {
    return this.status === 0 || this.status === 408 || this.status === 429 || this.status >= 500;
  }

  /** The credential is unknown or revoked: retrying cannot help. */
  get unauthorized(): boolean {
    return this.status === 401;
  }
}

/**
 * A 2xx answer the SDK cannot use: larger than `maxAnswerBytes` (`answer_too_large`), not JSON
 * (`answer_not_json`), nested deeper than 128 levels (`answer_too_deep`) or not the shape the
 * call answers (`answer_malformed`). `status` is the answer's. Retryable: every device call is
 * safe to repeat, and a proxy in the way may answer properly next time.
 */
export class InvalidAnswerError extends ApiError {
  constructor(status: number, code: 'answer_too_large' | 'answer_not_json' | 'answer_too_deep' | 'answer_malformed', message: string) {
    super(status, code, message);
    this.name = 'InvalidAnswerError';
  }

  override get retryable(): boolean {
    return true;
  }
}

/** How long one request may take and how much of its answer is read. */
export interface RequestLimits {
  /** The whole request, connecting to the last byte of the answer (default 10 000 ms). */
  requestTimeoutMs?: number;
  /** The largest answer read, enforced while it streams in (default 1 MiB). */
  maxAnswerBytes?: number;
}

const REQUEST_TIMEOUT_MS = 10_000;
/** The service's largest answers (a published manifest, a stored result) stay well below this. */
const MAX_ANSWER_BYTES = 1024 * 1024;
/** The service takes input nested at most 64 levels deep; its envelopes add a few. */
const MAX_ANSWER_DEPTH = 128;

export async function resolveUrl(source: UrlSource): Promise<string> {
  const url = typeof source === 'string' ? source : await source();
  return url.replace(/\/+$/, '');
}

/** Does the value nest deeper than `limit` arrays and objects? Iterative: depth costs no stack. */
function deeperThan(value: unknown, limit: number): boolean {
  const pending: [unknown, number][] = [[value, 1]];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [item, depth] = next;
    if (depth > limit) return true;
    for (const child of Object.values(item as object)) if (typeof child === 'object' && child !== null) pending.push([child, depth + 1]);
  }
  return false;
}

/** Reads the body up to `limit` bytes, stopping the stream as soon as it is over. */
async function readBounded(response: Response, limit: number): Promise<string> {
  const declared = Number(response.headers.get('content-length'));
  if (declared > limit) {
    await response.body?.cancel().catch(() => undefined);
    throw new InvalidAnswerError(response.status, 'answer_too_large', `The answer declares ${declared} bytes, over the ${limit} bytes the SDK reads.`);
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw new InvalidAnswerError(response.status, 'answer_too_large', `The answer is over the ${limit} bytes the SDK reads.`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The answer's envelope, parsed and checked: JSON, an object, and not too deep. */
function parseAnswer(status: number, text: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new InvalidAnswerError(status, 'answer_not_json', `The answer is not JSON (${text.length} characters).`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new InvalidAnswerError(status, 'answer_malformed', 'The answer is not a JSON object.');
  }
  if (deeperThan(parsed, MAX_ANSWER_DEPTH)) {
    throw new InvalidAnswerError(status, 'answer_too_deep', `The answer nests deeper than ${MAX_ANSWER_DEPTH} levels.`);
  }
  return parsed as Record<string, unknown>;
}

/** The error of a non-2xx answer: its envelope's code and message when it has one. */
function answerError(status: number, text: string): ApiError {
  let problem: { code?: unknown; message?: unknown } = {};
  try {
    const envelope = parseAnswer(status, text);
    if (typeof envelope.error === 'object' && envelope.error !== null) problem = envelope.error;
  } catch {
    // A proxy's HTML error page: keep the status, drop the body.
  }
  return new ApiError(
    status,
    typeof problem.code === 'string' ? problem.code : 'http_error',
    typeof problem.message === 'string' ? problem.message : `HTTP ${status}`,
  );
}

/** What the `data` of a call's 2xx answer must look like; anything else is `answer_malformed`. */
type Shape<T> = (data: unknown) => data is T;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isRecord = (value: unknown): value is DeviceRecord => isObject(value) && typeof value.id === 'string';
const isAnything = (_data: unknown): _data is unknown => true;
const isAccepted = (data: unknown): data is { accepted: number } =>
  typeof data === 'object' && data !== null && typeof (data as { accepted?: unknown }).accepted === 'number';

async function call<T>(
  fetchImpl: typeof fetch,
  url: UrlSource,
  path: string,
  init: { token: string; body?: unknown; headers?: Record<string, string>; shape: Shape<T>; limits: RequestLimits | undefined },
): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${init.token}`, ...init.headers };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const timeoutMs = init.limits?.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  // One signal for the whole request: it also aborts reading the body, so an answer that
  // drips a byte at a time cannot hold the call past its deadline.
  const signal = AbortSignal.timeout(timeoutMs);
  const failed = (error: unknown): ApiError => {
    if (error instanceof ApiError) return error;
    if (signal.aborted) return new ApiError(0, 'timeout', `The service did not answer within ${timeoutMs} ms.`);
    return new ApiError(0, 'unreachable', `The service did not answer: ${(error as Error).message}`);
  };
  let response: Response;
  try {
    response = await fetchImpl(`${await resolveUrl(url)}${path}`, {
      method: 'POST',
      headers,
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
      // Followed, a redirect would carry the device token (and a result's body) to whatever
      // host it names; the service never redirects a device call.
      redirect: 'manual',
      signal,
    });
  } catch (error) {
    throw failed(error);
  }
  if (response.status >= 300 && response.status < 400) {
    await response.body?.cancel().catch(() => undefined);
    throw new ApiError(
      response.status,
      'redirected',
      `The service answered HTTP ${response.status} with a redirect to ${JSON.stringify(response.headers.get('location'))}, which the SDK does not follow: configure the service URL it should use instead.`,
    );
  }
  let text: string;
  try {
    text = await readBounded(response, init.limits?.maxAnswerBytes ?? MAX_ANSWER_BYTES);
  } catch (error) {
    throw failed(error);
  }
  if (!response.ok) throw answerError(response.status, text);
  const envelope = parseAnswer(response.status, text);
  if (!('data' in envelope) || !init.shape(envelope.data)) {
    throw new InvalidAnswerError(response.status, 'answer_malformed', `The answer to POST ${path} is not the shape the SDK expects.`);
  }
  return envelope.data;
}

const isAttached = (data: unknown): data is { device: DeviceRecord; token: string; workspace: string } =>
  isObject(data) && isRecord(data.device) && typeof data.token === 'string' && typeof data.workspace === 'string';
const isPublished = (data: unknown): data is { device: DeviceRecord; children: DeviceRecord[] } =>
  isObject(data) &&
  isRecord(data.device) &&
  Array.isArray(data.children) &&
  data.children.every((c) => isRecord(c) && (c.key === null || typeof c.key === 'string'));
/** A command as far as the device loop relies on it: who runs it, what, with which arguments, until when. */
const isCommand = (data: unknown): data is DeviceCommand | null =>
  data === null ||
  (isObject(data) &&
    typeof data.id === 'string' &&
    typeof data.deviceId === 'string' &&
    typeof data.capability === 'string' &&
    isObject(data.args) &&
    typeof data.expiresAt === 'number');
const isTicket = (data: unknown): data is { ticket: string; expiresAt: number } =>
  isObject(data) && typeof data.ticket === 'string' && typeof data.expiresAt === 'number';

/** Attaches a device with a setup token (`POST /v1/sdk/devices`). Store the credentials: they are shown once. */
export async function attachDevice(
  options: {
    url: UrlSource;
    setupToken: string;
    name: string;
    kind?: 'device' | 'gateway';
    fetch?: typeof fetch;
  } & RequestLimits,
): Promise<DeviceCredentials & { device: DeviceRecord }> {
  const data = await call(options.fetch ?? fetch, options.url, '/v1/sdk/devices', {
    token: options.setupToken,
    body: { name: options.name, kind: options.kind ?? 'device' },
    shape: isAttached,
    limits: options,
  });
  return { deviceId: data.device.id, token: data.token, workspace: data.workspace, device: data.device };
}

/** The calls a device makes with its own credential. */
export function deviceApi(url: UrlSource, credentials: DeviceCredentials, fetchImpl: typeof fetch = fetch, limits?: RequestLimits) {
  const base = `/v1/device/${encodeURIComponent(credentials.deviceId)}`;
  const token = credentials.token;
  return {
    publishManifest: (manifest: Manifest) => call(fetchImpl, url, `${base}/manifest`, { token, body: manifest, shape: isPublished, limits }),
    next: () => call(fetchImpl, url, `${base}/next`, { token, headers: { 'x-service-workspace': credentials.workspace }, shape: isCommand, limits }),
    /** Repeat-safe: the same report again is answered with the stored action. */
    report: (actionId: string, report: ResultReport) =>
      call(fetchImpl, url, `${base}/result`, { token, body: { actionId, ...report }, shape: isAnything, limits }),
    /** Last-known values of read functions, without an action (`POST /v1/device/{id}/state`); `deviceId` names a gateway's child. */
    reportState: (values: Record<string, unknown>, deviceId?: string) =>
      call(fetchImpl, url, `${base}/state`, { token, body: { values, ...(deviceId !== undefined ? { deviceId } : {}) }, shape: isAccepted, limits }),
    eventsTicket: () => call(fetchImpl, url, `${base}/events-ticket`, { token, shape: isTicket, limits }),
    /** The WebSocket URL for a ticket. */
    eventsUrl: async (ticket: string) => `${(await resolveUrl(url)).replace(/^http/, 'ws')}${base}/events?ticket=${encodeURIComponent(ticket)}`,
  };
}

export type DeviceApi = ReturnType<typeof deviceApi>;
