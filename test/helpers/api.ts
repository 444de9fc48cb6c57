/**
 * A thin fetch client for tests: every call returns status, headers and parsed JSON.
 * Bodies default to `any` so assertions can reach into them; the tests, not the types,
 * check their shape.
 */
export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export interface RequestOptions {
  token?: string | undefined;
  body?: unknown;
  headers?: Record<string, string>;
  /** Raw body text, sent as is (for malformed JSON tests). */
  raw?: string;
}

export async function api<T = any>(base: string, method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const response = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: leave the text for the assertion to show.
  }
  return { status: response.status, headers: response.headers, body: parsed as T };
}

/**
 * Bound to one server: `client.post('/v1/…', { token, body })`. The base may be a function, read
 * at each call, for a client made before its server has started (`useTestServer().api`).
 */
export function client(base: string | (() => string)) {
  const url = typeof base === 'string' ? () => base : base;
  return {
    get: <T = any>(path: string, options?: RequestOptions) => api<T>(url(), 'GET', path, options),
    post: <T = any>(path: string, options?: RequestOptions) => api<T>(url(), 'POST', path, options),
    request: <T = any>(method: string, path: string, options?: RequestOptions) => api<T>(url(), method, path, options),
  };
}

export type Client = ReturnType<typeof client>;
