import { beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, lampManifest } from '../helpers/fixtures.js';
import { connect, rawMcp } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * MCP tools/list used to answer every tool in one message (1,205 tools, 485 KB).
 * It now pages with MCP's own cursor: at most 200 tools a page, fixed tools on the first.
 */
const FUNCTIONS = 420;

let owner: string;
let many: { token: string };
let few: { token: string };

type ListResult = { tools: { name: string }[]; nextCursor?: string };

async function page(token: string, cursor?: string, id: number | string = 1) {
  return rawMcp(server.url, { token, method: 'tools/list', id, params: cursor === undefined ? {} : { cursor } });
}

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-pages');
  many = await createAgent(api, owner, { name: 'many', access: 'act', principal: 'agent:many' });
  // Seven panels of 60 functions (a manifest holds at most 64).
  const names = Array.from({ length: FUNCTIONS / 7 }, (_, i) => `f${i}`);
  for (const name of ['A', 'B', 'C', 'D', 'E', 'F', 'G'].map((letter) => `Panel ${letter}`)) {
    const device = await attachDevice(api, owner, {
      name,
      manifest: { capabilities: names.map((n) => ({ name: n, kind: 'read', arguments: { type: 'object' } })) },
    });
    await grant(api, owner, 'agent:many', device.id, names);
  }
  const lamp = await attachDevice(api, owner, { name: 'Lamp', manifest: lampManifest });
  few = await createAgent(api, owner, { name: 'few', access: 'act', principal: 'agent:few' });
  await grant(api, owner, 'agent:few', lamp.id, ['get_state']);
});

describe('tools/list pages', () => {
  it('pages a long list with nextCursor, fixed tools first, every tool exactly once (and again from the cache)', async () => {
    for (let round = 0; round < 2; round++) {
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const res = await page(many.token, cursor, `p${pages}`);
        expect(res.status, res.text).toBe(200);
        const result = res.json.result as ListResult;
        expect(result.tools.length).toBeLessThanOrEqual(200);
        if (pages === 0) expect(result.tools[0]!.name).toBe('list_devices');
        seen.push(...result.tools.map((t) => t.name));
        cursor = result.nextCursor;
        pages++;
      } while (cursor !== undefined);
      const devices = seen.filter((n) => n.includes('__'));
      expect(devices).toHaveLength(FUNCTIONS);
      expect(new Set(seen).size).toBe(seen.length);
      expect(pages).toBe(Math.ceil(seen.length / 200));
    }
  });

  it('lists every page through the official client, 2025 handshake included', async () => {
    for (const era of ['modern', 'legacy'] as const) {
      const mcp = await connect(server.url, many.token, era);
      const names: string[] = [];
      let cursor: string | undefined;
      do {
        const result = await mcp.listTools(cursor === undefined ? {} : { cursor });
        names.push(...result.tools.map((t) => t.name));
        cursor = result.nextCursor;
      } while (cursor);
      expect(names.filter((n) => n.includes('__'))).toHaveLength(FUNCTIONS);
      await mcp.close();
    }
  });

  it('answers an invalid cursor with -32602', async () => {
    const first = (await page(many.token)).json.result as ListResult;
    const forged = [
      'nonsense',
      Buffer.from('tools:7').toString('base64url'),
      Buffer.from('tools:99999800').toString('base64url'),
      Buffer.from('tools:-200').toString('base64url'),
      `${first.nextCursor}=`,
    ];
    for (const cursor of [...forged, first.nextCursor!.toUpperCase()]) {
      const res = await page(many.token, cursor);
      expect(res.json.error?.code, `${cursor}: ${res.text}`).toBe(-32602);
    }
    // A caller whose list fits one page has no second page to point at.
    const one = (await page(few.token)).json.result as ListResult;
    expect(one.nextCursor).toBeUndefined();
    expect((await page(few.token, first.nextCursor)).json.error.code).toBe(-32602);
  });

  it('answers a short list in one page without nextCursor', async () => {
    const res = await page(few.token);
    expect(res.status).toBe(200);
    expect(res.json.result.nextCursor).toBeUndefined();
    expect((res.json.result as ListResult).tools.filter((t) => t.name.includes('__'))).toHaveLength(1);
  });
});
