/**
 * The device side of the HTTP API (docs/reference/rules.md "Devices" and "Actions"): plain `fetch`, typed
 * answers, one error type. Used by the Device class; usable on its own.
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

const REQUEST_TIMEOUT_MS = 10_000;

export async function resolveUrl(source: UrlSource): Promise<string> {
  const url = typeof source === 'string' ? source : await source();
  return url.replace(/\/+$/, '');
}

async function call<T>(
  fetchImpl: typeof fetch,
  url: UrlSource,
  path: string,
  init: { token: string; body?: unknown; headers?: Record<string, string> },
): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${init.token}`, ...init.headers };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetchImpl(`${await resolveUrl(url)}${path}`, {
      method: 'POST',
      headers,
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (error) {
    throw new ApiError(0, 'unreachable', `The service did not answer: ${(error as Error).message}`);
  }
  const text = await response.text().catch(() => '');
  let parsed: { data?: T; error?: { code?: string; message?: string } } = {};
  try {
    parsed = text ? (JSON.parse(text) as typeof parsed) : {};
  } catch {
    // A proxy's HTML error page: keep the status, drop the body.
  }
  if (!response.ok) {
    throw new ApiError(response.status, parsed.error?.code ?? 'http_error', parsed.error?.message ?? `HTTP ${response.status}`);
  }
  return parsed.data as T;
}

/** Attaches a device with a setup token (`POST /v1/sdk/devices`). Store the credentials: they are shown once. */
export async function attachDevice(options: {
  url: UrlSource;
  setupToken: string;
  name: string;
  kind?: 'device' | 'gateway';
  fetch?: typeof fetch;
}): Promise<DeviceCredentials & { device: DeviceRecord }> {
  const data = await call<{ device: DeviceRecord; token: string; workspace: string }>(options.fetch ?? fetch, options.url, '/v1/sdk/devices', {
    token: options.setupToken,
    body: { name: options.name, kind: options.kind ?? 'device' },
  });
  return { deviceId: data.device.id, token: data.token, workspace: data.workspace, device: data.device };
}

/** The calls a device makes with its own credential. */
export function deviceApi(url: UrlSource, credentials: DeviceCredentials, fetchImpl: typeof fetch = fetch) {
  const base = `/v1/device/${encodeURIComponent(credentials.deviceId)}`;
  const token = credentials.token;
  return {
    publishManifest: (manifest: Manifest) =>
      call<{ device: DeviceRecord; children: DeviceRecord[] }>(fetchImpl, url, `${base}/manifest`, { token, body: manifest }),
    next: () => call<DeviceCommand | null>(fetchImpl, url, `${base}/next`, { token, headers: { 'x-service-workspace': credentials.workspace } }),
    /** Repeat-safe: the same report again is answered with the stored action. */
    report: (actionId: string, report: ResultReport) => call<unknown>(fetchImpl, url, `${base}/result`, { token, body: { actionId, ...report } }),
    eventsTicket: () => call<{ ticket: string; expiresAt: number }>(fetchImpl, url, `${base}/events-ticket`, { token }),
    /** The WebSocket URL for a ticket. */
    eventsUrl: async (ticket: string) => `${(await resolveUrl(url)).replace(/^http/, 'ws')}${base}/events?ticket=${encodeURIComponent(ticket)}`,
  };
}

export type DeviceApi = ReturnType<typeof deviceApi>;
