import { fc, test } from '@fast-check/vitest';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { client } from '../helpers/api.js';
import { attachDevice } from '../helpers/fixtures.js';
import { rawHead, rawRequest, UPGRADE_HEADERS } from '../helpers/raw-http.js';
import { useTestServer } from '../helpers/server.js';

/**
 * No request can end the process. Raw request lines, paths,
 * percent-encodings and headers no HTTP client would send go over a plain TCP socket to the
 * real server, as ordinary requests and as WebSocket upgrades; after every one the server
 * must still answer GET /healthz, and whatever it answered must not be a 500. An unhandled
 * rejection inside the (in-process) server fails the run too: vitest reports it.
 */

const RUNS = 250;
const stats = new Map<string, number>();
let deviceId: string;

const server = useTestServer();

beforeAll(async () => {
  const http = client(server.url);
  deviceId = (await attachDevice(http, await server.ownerToken('raw-fuzz-owner'))).id;
});
afterAll(async () => {
  if (process.env.FUZZ_STATS) console.log(Object.fromEntries([...stats].sort()));
});

const hex = '0123456789abcdefABCDEFgG';
/** A percent-escape, valid or not: `%C0` (a lone UTF-8 lead byte), `%`, `%G1`, `%00`, `%2f`… */
const percent = fc.oneof(
  fc.tuple(fc.constantFrom(...hex), fc.constantFrom(...hex)).map(([a, b]) => `%${a}${b}`),
  fc.constantFrom('%', '%0', '%C0', '%E0%A4', '%F0%9F%98', '%ED%A0%80', '%00', '%2f', '%2F%2E%2E', '%25', '%uD800', '%FF%FE'),
);
const segmentPiece = fc.oneof(
  { weight: 3, arbitrary: percent },
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 8 }).map((s) => s.replace(/[\s]/g, '')) },
  { weight: 1, arbitrary: fc.constantFrom('[', ']', '@', ':', '..', '.', '\\', '|', '^', '`', '{', '}', '#', '?', '//', ';', 'é', '\u0000', '😀') },
);
const segment = fc.array(segmentPiece, { maxLength: 4 }).map((pieces) => pieces.join(''));

/** Request targets: the wake path with a broken id or ticket, other paths, and forms a parser may choke on. */
const target = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(segment, fc.constantFrom('/events', '/events?ticket=', '/events?ticket=%C0', '/events/', ''))
      .map(([id, tail]) => `/v1/device/${id}${tail}`),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.constantFrom('/', '//', '///', '/v1/', '/mcp/', '/oauth/', '/healthz/', '/.well-known/', 'http://', 'http://[', '*', ''),
        fc.array(segment, { maxLength: 3 }),
      )
      .map(([start, parts]) => start + parts.join('/')),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '//[',
      '/v1/device/%C0/events',
      'http://127.0.0.1/v1/device/%C0/events',
      'http://[::1/v1/device/x/events',
      '//[::1]:99999/',
      '/v1/device/../device/x/events',
      '/v1/device/x/events?ticket=dfc_ticket_%ZZ',
      '/v1/device/x/events?%C0=%C0&ticket',
      `/${'%C0'.repeat(2000)}`,
      `/v1/device/${'a'.repeat(9000)}/events`,
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
);
const method = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('GET', 'POST', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'PATCH') },
  { weight: 1, arbitrary: fc.constantFrom('CONNECT', 'TRACE', 'get', 'G E T', 'PRI', '') },
);
const version = fc.oneof(
  { weight: 6, arbitrary: fc.constant('HTTP/1.1') },
  { weight: 1, arbitrary: fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/9.9', 'HTTP/1.1 x', '') },
);
const headerValue = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      '%C0',
      '//[',
      '\u0000',
      'é',
      'a'.repeat(300),
      'websocket',
      'Upgrade',
      'chunked',
      '-1',
      '99999999999999999999',
      '0x10',
      'Bearer %C0',
      'http://[::1',
    ),
  },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 30 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
);
const header = fc.tuple(
  fc.oneof(
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        'Host',
        'X-Request-Id',
        'Content-Length',
        'Transfer-Encoding',
        'Connection',
        'Upgrade',
        'Sec-WebSocket-Key',
        'Sec-WebSocket-Version',
        'Sec-WebSocket-Extensions',
        'Sec-WebSocket-Protocol',
        'Origin',
        'Authorization',
        'Cookie',
        'X-Forwarded-For',
        'Expect',
      ),
    },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 12 }) },
  ),
  headerValue,
);

const requestCase = fc.record({
  method,
  target,
  version,
  host: fc.boolean(),
  headers: fc.array(header, { maxLength: 3 }),
  body: fc.oneof(
    { weight: 4, arbitrary: fc.constant('') },
    { weight: 1, arbitrary: fc.oneof(fc.string({ maxLength: 64 }), fc.constantFrom('0\r\n\r\n', '5\r\nhello\r\n0\r\n\r\n')) },
  ),
});

type RequestCase = typeof requestCase extends fc.Arbitrary<infer T> ? T : never;

async function send(c: RequestCase, upgrade: boolean) {
  const requestLine = [c.method, c.target, c.version].filter((part) => part !== '').join(' ');
  const headers = [...(c.host ? ['Host: 127.0.0.1'] : []), ...(upgrade ? UPGRADE_HEADERS : []), ...c.headers.map(([name, value]) => `${name}: ${value}`)];
  // latin1 so every generated code unit goes out as one byte, as a hostile client would write it.
  const answer = await rawRequest(server.service.port, Buffer.from(rawHead(requestLine, headers) + c.body, 'latin1'), 1000);
  const key = `${upgrade ? 'upgrade' : 'plain'} ${answer.status ?? (answer.closed ? 'closed' : 'open')}`;
  stats.set(key, (stats.get(key) ?? 0) + 1);
  expect(answer.status === undefined || answer.status < 500 || answer.status === 503, answer.text.slice(0, 400)).toBe(true);
  const health = await fetch(`${server.url}/healthz`);
  expect(health.status).toBe(200);
}

describe('raw requests no HTTP client would send', () => {
  test.prop([requestCase], { numRuns: RUNS })('a plain request leaves the server answering /healthz, with no 500', (c) => send(c, false));
  test.prop([requestCase], { numRuns: RUNS })('an Upgrade: websocket request leaves the server answering /healthz, with no 500', (c) => send(c, true));
  test.prop([segment, fc.constantFrom('', '?ticket=', '?ticket=dfc_ticket_x', '?ticket=%C0')], { numRuns: 100 })(
    "an upgrade on the wake path of a real device with a broken ticket is refused in the envelope, and the device's path still works",
    async (tail, query) => {
      const answer = await rawRequest(
        server.service.port,
        Buffer.from(rawHead(`GET /v1/device/${deviceId}${tail}/events${query} HTTP/1.1`, ['Host: 127.0.0.1', ...UPGRADE_HEADERS]), 'latin1'),
      );
      expect([400, 401, 404]).toContain(answer.status);
      expect(answer.text).toMatch(/"error":\{"code":"(invalid_request|unauthorized|not_found)"/);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    },
  );
});
