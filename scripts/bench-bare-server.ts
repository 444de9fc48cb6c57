/**
 * The `/healthz` floors of `npm run bench` (scripts/bench.ts): a bare server that answers
 * `GET /healthz` with the same JSON document the service answers (docs/operators/probes.md "Probes": service
 * name, protocol version, whether auth is configured, the kill switch), encoded per request as
 * the service encodes it, and nothing else: no request id, no log line, no metrics.
 *
 * `BARE_FRAMEWORK=node` (the default) answers from a plain `node:http` listener: the service's
 * /healthz rate as a share of this one's, in the same run on the same core at the same
 * concurrency, is what the service's per-request HTTP layer costs (the target in
 * docs/performance.md: at least 80 %). `BARE_FRAMEWORK=hono` answers through Hono and
 * @hono/node-server with one route and no middleware, as the service mounts its app: its
 * share of the plain listener is what the framework alone costs, the part of that gap no code
 * of the service can remove (docs/contributors/performance-history.md "The framework's own share of /healthz"). A
 * measuring device, nothing else uses it.
 */
import http from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import { Hono } from 'hono';

const settings = { service: 'dfc', protocolVersion: 1, authConfigured: false, deviceControlsEnabled: true };

function plainServer(): http.Server {
  return http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/healthz') {
      const text = JSON.stringify(settings);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"error":"not found"}');
  });
}

function honoServer(): http.Server {
  const app = new Hono();
  app.get('/healthz', (c) => c.json(settings));
  return createAdaptorServer({ fetch: app.fetch }) as http.Server;
}

const server = process.env.BARE_FRAMEWORK === 'hono' ? honoServer() : plainServer();
server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.send!({ type: 'ready', url: `http://127.0.0.1:${port}`, pid: process.pid });
});

process.on('message', (message: { type: string }) => {
  if (message.type === 'cpu') process.send!({ type: 'cpu', usage: process.cpuUsage() });
  if (message.type === 'stop') {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  }
});
