/**
 * The conformance run's loopback proxy (scripts/conformance.ts): what the suite sends reaches
 * the service as it was sent, with two additions.
 *
 * - The agent's `Authorization: Bearer …` (the suite cannot send one).
 * - Fixture tool names (`greet`) become the fixture device's tool names (`greet__<12 hex>`,
 *   scripts/conformance-device.ts) in exactly three places: `params.name` of a `tools/call`
 *   request, that request's `Mcp-Name` header, and the tool names of a `tools/list` result
 *   (back to the fixture names). A request or answer with nothing to rename is forwarded byte
 *   for byte; everything else (Host and Origin included) is never touched.
 */
import http from 'node:http';

export interface ToolNameMap {
  /** Fixture name → device tool name. */
  toTool: ReadonlyMap<string, string>;
  /** Device tool name → fixture name. */
  toFixture: ReadonlyMap<string, string>;
}

export interface ProxyRoute {
  target: URL;
  token: string;
  names: ToolNameMap;
}

type Message = { method?: unknown; params?: { name?: unknown }; result?: { tools?: { name?: unknown }[] } };

function parse(text: string): Message | Message[] | undefined {
  try {
    return JSON.parse(text) as Message | Message[];
  } catch {
    return undefined;
  }
}

/** The request with fixture names renamed, or undefined when it has none to rename. */
function renameRequest(body: Buffer, headers: http.IncomingHttpHeaders, names: ToolNameMap): { body: Buffer; headers: http.IncomingHttpHeaders } | undefined {
  const parsed = parse(body.toString('utf8'));
  if (parsed === undefined || parsed === null || typeof parsed !== 'object') return undefined;
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  let renamed = false;
  for (const message of messages) {
    const name = message?.method === 'tools/call' ? message.params?.name : undefined;
    if (typeof name === 'string' && names.toTool.has(name)) {
      message.params!.name = names.toTool.get(name);
      renamed = true;
    }
  }
  const header = headers['mcp-name'];
  const single = Array.isArray(parsed) ? undefined : parsed;
  const headerName = single?.method === 'tools/call' && typeof header === 'string' ? names.toTool.get(header) : undefined;
  if (!renamed && headerName === undefined) return undefined;
  const out = Buffer.from(renamed ? JSON.stringify(parsed) : body);
  const { 'transfer-encoding': _chunked, ...rest } = headers;
  return { body: out, headers: { ...rest, ...(headerName ? { 'mcp-name': headerName } : {}), 'content-length': String(out.length) } };
}

/** A tools/list answer (JSON, or an event stream's `data:` lines) with device tool names back as fixture names. */
function renameListAnswer(text: string, json: boolean, names: ToolNameMap): string {
  const rename = (payload: string): string => {
    const parsed = parse(payload);
    const messages = Array.isArray(parsed) ? parsed : parsed ? [parsed] : [];
    let renamed = false;
    for (const tool of messages.flatMap((m) => m?.result?.tools ?? [])) {
      const fixture = typeof tool?.name === 'string' ? names.toFixture.get(tool.name) : undefined;
      if (fixture) {
        tool.name = fixture;
        renamed = true;
      }
    }
    return renamed ? JSON.stringify(parsed) : payload;
  };
  if (json) return rename(text);
  return text.replace(/^data: ?(.*)$/gm, (_line, payload: string) => `data: ${rename(payload)}`);
}

function isToolsList(body: Buffer): boolean {
  const parsed = parse(body.toString('utf8'));
  return !Array.isArray(parsed) && parsed?.method === 'tools/list';
}

function forward(route: ProxyRoute, req: http.IncomingMessage, body: Buffer, res: http.ServerResponse): void {
  const renamed = renameRequest(body, req.headers, route.names);
  const headers = { ...(renamed?.headers ?? req.headers), authorization: `Bearer ${route.token}` };
  const listing = isToolsList(body);
  const { hostname: host, port } = route.target;
  const upstream = http.request({ host, port, path: req.url, method: req.method, headers }, (up) => {
    const type = String(up.headers['content-type'] ?? '');
    if (!listing || up.headers['content-encoding'] || !/application\/json|text\/event-stream/.test(type)) {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
      return;
    }
    const chunks: Buffer[] = [];
    up.on('data', (chunk: Buffer) => chunks.push(chunk));
    up.on('end', () => {
      const text = renameListAnswer(Buffer.concat(chunks).toString('utf8'), type.includes('application/json'), route.names);
      const { 'transfer-encoding': _chunked, ...rest } = up.headers;
      res.writeHead(up.statusCode ?? 502, { ...rest, 'content-length': String(Buffer.byteLength(text)) });
      res.end(text);
    });
  });
  upstream.on('error', () => res.destroy());
  res.on('close', () => upstream.destroy());
  upstream.end(renamed?.body ?? body);
}

/**
 * Listens on a loopback port; `route()` is read per request (the service starts after the
 * proxy), and a request that comes before there is one is answered 503.
 */
export function startProxy(route: () => ProxyRoute | undefined): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const to = route();
      if (to) forward(to, req, Buffer.concat(chunks), res);
      else res.writeHead(503).end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}
