import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestServer } from '../helpers/server.js';

const run = promisify(execFile);

/**
 * The getting-started walk-through as a client generated from /openapi.json would write it: every
 * path, body and answer below is typed by the generated `paths`, so a document that drifts
 * from what the server accepts fails here at `tsc` or at run time.
 */
const WALK_THROUGH = `
import createClient from 'openapi-fetch';
import type { paths } from './api.js';

// A client needs nothing of Node's types but its environment (lib.dom has fetch and console).
declare const process: { env: Record<string, string | undefined> };

const api = createClient<paths>({ baseUrl: process.env.BASE_URL });
const bearer = (token: string) => ({ Authorization: \`Bearer \${token}\` });
const owner = bearer(process.env.OWNER_TOKEN ?? '');

function data<T>(answer: { data?: { data: T }; error?: unknown; response: Response }): T {
  if (!answer.data) throw new Error(\`\${answer.response.status} \${JSON.stringify(answer.error)}\`);
  return answer.data.data;
}

const agent = data(await api.POST('/v1/agent-connections', { headers: owner, body: { name: 'Support bot', access: 'act' } }));
const setup = data(
  await api.POST('/v1/device-setup-tokens', { headers: owner, body: { name: 'Hall thermostat', ttlSeconds: 600, deviceLimit: 1 } }),
);
const attached = data(await api.POST('/v1/sdk/devices', { headers: bearer(setup.token), body: { name: 'Hall thermostat', kind: 'device' } }));
const deviceId: string = attached.device.id;
const device = bearer(attached.token);
data(
  await api.POST('/v1/device/{deviceId}/manifest', {
    params: { path: { deviceId } },
    headers: device,
    body: {
      capabilities: [
        { name: 'set_target', kind: 'control', arguments: { type: 'object', properties: { celsius: { type: 'number' } }, required: ['celsius'] } },
      ],
    },
  }),
);
const grants = data(
  await api.POST('/v1/grants', { headers: owner, body: { principal: agent.principal, deviceId, capabilities: ['set_target'] } }),
);
const requested = data(
  await api.POST('/v1/devices/{deviceId}/actions', {
    params: { path: { deviceId } },
    headers: bearer(agent.token),
    body: { capability: 'set_target', arguments: { celsius: 21 } },
  }),
);
const next = data(
  await api.POST('/v1/device/{deviceId}/next', {
    params: { path: { deviceId }, header: { 'x-service-workspace': attached.workspace } },
    headers: device,
  }),
);
if (next === null) throw new Error('the device was handed nothing');
data(
  await api.POST('/v1/device/{deviceId}/result', {
    params: { path: { deviceId } },
    headers: device,
    body: { actionId: next.id, ok: true, result: { celsius: next.args.celsius } },
  }),
);
const done = data(await api.GET('/v1/actions/{actionId}', { params: { path: { actionId: requested.id } }, headers: bearer(agent.token) }));
const completedAt: number | null = done.completedAt;
console.log(JSON.stringify({ grants: grants.length, handed: next.id === requested.id, status: done.status, result: done.result, completedAt }));
`;

let dir: string;
let document: string;
const server = useTestServer();

beforeAll(async () => {
  document = await fetch(`${server.url}/openapi.json`).then((r) => r.text());
  // Outside the repository, as a client project would be; node_modules lends it openapi-fetch.
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-client-'));
  fs.symlinkSync(path.resolve('node_modules'), path.join(dir, 'node_modules'), 'dir');
});
afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('GET /openapi.json as third-party tools read it', () => {
  it("passes Redocly's recommended ruleset with no errors", async () => {
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({ source: document, absoluteRef: `${server.url}/openapi.json`, config });
    const errors = problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`);
    expect(errors).toEqual([]);
  });

  // Some 15 s alone (generation, tsc, a tsx child); the ceiling leaves room for a busy machine.
  it('generates an openapi-typescript client that type-checks and runs the docs walk-through against the live server', { timeout: 60_000 }, async () => {
    fs.writeFileSync(path.join(dir, 'api.ts'), astToString(await openapiTS(document)));
    fs.writeFileSync(path.join(dir, 'walk-through.ts'), WALK_THROUGH);
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    const program = ts.createProgram([path.join(dir, 'walk-through.ts')], {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: [],
      skipLibCheck: true,
    });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(diagnostics).toEqual([]);

    const { stdout } = await run(path.resolve('node_modules/.bin/tsx'), [path.join(dir, 'walk-through.ts')], {
      env: { ...process.env, BASE_URL: server.url, OWNER_TOKEN: await server.ownerToken('walker') },
    });
    expect(JSON.parse(stdout)).toEqual({ grants: 1, handed: true, status: 'succeeded', result: { celsius: 21 }, completedAt: expect.any(Number) });
  });
});
