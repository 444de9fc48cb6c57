import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { CredentialKind, Surface } from '../../src/domain/context.js';
import type { AccessRequirement, AnyOperation } from '../../src/domain/operation.js';
import { allOperations, operations } from '../../src/domain/registry.js';
import { routes } from '../../src/rest/routes.js';

/**
 * docs/contributors/architecture.md "One descriptor per operation": a test fails if an operation lacks its credential or access
 * declaration. `invoke` trusts these declarations, so a missing or odd one is a hole on
 * every surface built from the registry.
 */

// A Record over the union: adding a credential kind or access level without deciding here
// whether it is valid fails to compile.
const credentialKinds: Record<CredentialKind | 'public', true> = { public: true, owner: true, agent: true, setup: true, device: true };
const accessLevels: Record<AccessRequirement, true> = { none: true, read: true, 'per-function': true };
const surfaces: Record<Surface, true> = { rest: true, mcp: true };

/** Everything wrong with an operation's declaration; empty when it is sound. */
function declarationProblems(operation: Partial<AnyOperation> & { name?: unknown }): string[] {
  const problems: string[] = [];
  const credentials = operation.credentials as unknown;
  if (!Array.isArray(credentials) || credentials.length === 0) {
    problems.push('declares no credentials');
  } else {
    for (const kind of credentials) if (!(kind in credentialKinds)) problems.push(`declares unknown credential kind ${String(kind)}`);
    if (new Set(credentials).size !== credentials.length) problems.push('lists a credential kind twice');
    // `invoke` skips every credential check for a public operation, so mixing would let any
    // credential kind in.
    if (credentials.includes('public') && credentials.length > 1) problems.push('mixes public with credential kinds');
  }
  const access = operation.access as unknown;
  if (typeof access !== 'string' || !(access in accessLevels)) {
    problems.push(`declares no valid access (${String(access)})`);
  } else if (Array.isArray(credentials)) {
    // Agents carry a ceiling: an operation open to them must say what it needs; one closed
    // to them has nothing to check.
    const forAgents = credentials.includes('agent');
    if (forAgents && access === 'none') problems.push('is open to agents but declares access "none"');
    if (!forAgents && access !== 'none') problems.push(`is closed to agents but declares access "${access}"`);
  }
  if (typeof operation.name !== 'string' || !/^[a-z][A-Za-z]*\.[a-z][A-Za-z]*$/.test(operation.name)) problems.push('name is not resource.verb');
  if (typeof operation.description !== 'string' || operation.description.length < 10) problems.push('has no description');
  if (!(operation.input instanceof z.ZodType) || !(operation.output instanceof z.ZodType)) problems.push('lacks input or output schema');
  if (typeof operation.run !== 'function') problems.push('has no run');
  if (typeof operation.title !== 'string' || operation.title.length < 3) problems.push('has no title');
  if (typeof operation.hints?.readOnly !== 'boolean') problems.push('declares no readOnly hint');
  problems.push(...surfaceProblems(operation));
  return problems;
}

/** Fields the shape of an input schema must hold, when it is an object schema. */
function inputFields(operation: Partial<AnyOperation>): Set<string> | undefined {
  const shape = (operation.input as { shape?: Record<string, unknown> } | undefined)?.shape;
  return shape ? new Set(Object.keys(shape)) : undefined;
}

/** Everything wrong with how an operation declares its surfaces (OAuth, routes, MCP tool, own device, kill switch). */
function surfaceProblems(operation: Partial<AnyOperation>): string[] {
  const problems: string[] = [];
  const credentials = (operation.credentials ?? []) as readonly string[];
  const forAgents = credentials.includes('agent');
  if (forAgents && !Array.isArray(operation.oauth)) problems.push('is open to agents but does not say where OAuth tokens are accepted');
  if (!forAgents && operation.oauth !== undefined) problems.push('declares OAuth surfaces but is closed to agents');
  for (const surface of operation.oauth ?? []) if (!(surface in surfaces)) problems.push(`declares unknown surface ${String(surface)}`);
  if (!Array.isArray(operation.rest)) {
    problems.push('declares no REST routes (an empty list for none)');
  } else {
    const fields = inputFields(operation);
    for (const route of operation.rest) {
      if (route.method === 'GET' && operation.hints?.readOnly !== true) problems.push(`has GET ${route.path} but is not read-only`);
      for (const [, name] of route.path.matchAll(/\{(\w+)\}/g))
        if (fields && !fields.has(name!)) problems.push(`has path parameter ${name} that its input lacks`);
    }
    if (operation.rest.length === 0 && !operation.mcp && !forAgents) problems.push('is reachable from no surface');
  }
  if (operation.mcp) {
    if (!/^[a-z][a-z0-9_]{0,63}$/.test(operation.mcp.name) || operation.mcp.name.includes('__'))
      problems.push(`has MCP tool name ${operation.mcp.name} outside [a-z0-9_] or with __`);
    if (!forAgents) problems.push('has an MCP tool but is closed to agents');
  }
  if (operation.ownDevice !== undefined) {
    if (!credentials.includes('device')) problems.push('declares ownDevice but is closed to devices');
    if (!inputFields(operation)?.has(operation.ownDevice)) problems.push(`declares ownDevice ${operation.ownDevice} that its input lacks`);
  }
  if (operation.queuesDeviceActions && operation.hints?.readOnly) problems.push('queues device actions but claims to be read-only');
  // The declarations invoke enforces must be there wherever they are needed: a device-facing
  // operation naming a device, and an operation acting on device functions.
  if (credentials.includes('device') && inputFields(operation)?.has('deviceId') && operation.ownDevice === undefined) {
    problems.push('takes a deviceId from a device credential but does not declare ownDevice');
  }
  if (operation.access === 'per-function' && !operation.queuesDeviceActions) problems.push('acts on device functions but does not declare queuesDeviceActions');
  return problems;
}

describe('operation registry', () => {
  it('holds operations', () => {
    expect(allOperations.length).toBeGreaterThan(10);
  });

  it.each(allOperations.map((operation) => [operation.name, operation] as const))('%s declares its credentials and access', (_name, operation) => {
    expect(declarationProblems(operation)).toEqual([]);
  });

  // `operations.x` in a surface and `export const x` in the domain name one thing, so a reader
  // finds the declaration by the name the caller used.
  it('holds each operation under the name its domain module exports it by', async () => {
    const domain = path.resolve(import.meta.dirname, '../..', 'src', 'domain');
    const exportedAs = new Map<unknown, string[]>();
    for (const file of fs.readdirSync(domain, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'))) {
      const module = (await import(path.join(domain, file))) as Record<string, unknown>;
      for (const [name, value] of Object.entries(module)) exportedAs.set(value, [...(exportedAs.get(value) ?? []), name]);
    }
    const misnamed = Object.entries(operations).filter(([key, operation]) => !exportedAs.get(operation)?.includes(key));
    expect(misnamed.map(([key]) => key)).toEqual([]);
  });

  it('has unique operation names', () => {
    const names = allOperations.map((operation) => operation.name);
    expect(names.filter((name, index) => names.indexOf(name) !== index)).toEqual([]);
  });

  it('only health, readiness and the legacy board enrollment are open without a credential', () => {
    const open = allOperations.filter((operation) => operation.credentials.includes('public')).map((operation) => operation.name);
    expect(open.sort()).toEqual(['enrollments.enroll', 'health.get', 'readiness.get']);
  });
});

describe('the registry check itself', () => {
  const sound = allOperations.find((operation) => operation.name === 'account.get')!;

  it.each([
    ['no credentials at all', { ...sound, credentials: undefined }, 'declares no credentials'],
    ['an empty credentials list', { ...sound, credentials: [] }, 'declares no credentials'],
    ['an unknown credential kind', { ...sound, credentials: ['admin'] }, 'declares unknown credential kind admin'],
    ['public mixed with owner', { ...sound, credentials: ['public', 'owner'] }, 'mixes public with credential kinds'],
    ['no access', { ...sound, access: undefined }, 'declares no valid access (undefined)'],
    ['an unknown access', { ...sound, access: 'write' }, 'declares no valid access (write)'],
    ['agents with access none', { ...sound, credentials: ['owner', 'agent'], access: 'none' }, 'is open to agents but declares access "none"'],
    ['no title', { ...sound, title: undefined }, 'has no title'],
    ['no hints', { ...sound, hints: undefined }, 'declares no readOnly hint'],
    [
      'agents without OAuth surfaces',
      { ...sound, credentials: ['owner', 'agent'], access: 'read' },
      'is open to agents but does not say where OAuth tokens are accepted',
    ],
    ['OAuth surfaces for owners only', { ...sound, oauth: ['rest'] }, 'declares OAuth surfaces but is closed to agents'],
    ['no REST list', { ...sound, rest: undefined }, 'declares no REST routes (an empty list for none)'],
    ['a GET route on a changing operation', { ...sound, hints: { readOnly: false } }, 'has GET /v1/account but is not read-only'],
    [
      'a path parameter the input lacks',
      { ...sound, rest: [{ method: 'GET', path: '/v1/account/{accountId}' }] },
      'has path parameter accountId that its input lacks',
    ],
    [
      'an MCP tool name with a dot',
      { ...sound, credentials: ['agent'], access: 'read', oauth: ['mcp'], mcp: { name: 'get.account' } },
      'has MCP tool name get.account outside [a-z0-9_] or with __',
    ],
    ['an MCP tool for owners only', { ...sound, mcp: { name: 'get_account' } }, 'has an MCP tool but is closed to agents'],
    ['ownDevice without device credentials', { ...sound, ownDevice: 'deviceId' }, 'declares ownDevice but is closed to devices'],
    ['a read-only operation that queues actions', { ...sound, queuesDeviceActions: true }, 'queues device actions but claims to be read-only'],
    [
      'a device operation naming a device without ownDevice',
      { ...allOperations.find((operation) => operation.name === 'device.result')!, ownDevice: undefined },
      'takes a deviceId from a device credential but does not declare ownDevice',
    ],
    [
      'a per-function operation without the kill switch',
      { ...allOperations.find((operation) => operation.name === 'actions.request')!, queuesDeviceActions: undefined },
      'acts on device functions but does not declare queuesDeviceActions',
    ],
  ])('fails an operation with %s', (_label, operation, problem) => {
    expect(declarationProblems(operation as unknown as AnyOperation)).toContain(problem);
  });
});

describe('REST routes', () => {
  const registered = new Set(allOperations);

  it.each(routes.map((route) => [`${route.method} ${route.path}`, route] as const))('%s calls a registry operation', (_label, route) => {
    expect(registered.has(route.operation)).toBe(true);
  });

  it('never lets a route with a {parameter} shadow a literal route declared after it', () => {
    routes.forEach((later, index) => {
      for (const earlier of routes.slice(0, index)) {
        const a = earlier.path.split('/');
        const b = later.path.split('/');
        const shadowing = earlier.method === later.method && a.length === b.length && a.every((segment, i) => segment === b[i] || segment.startsWith('{'));
        expect(shadowing, `${earlier.path} before ${later.path}`).toBe(false);
      }
    });
  });

  it('is exactly the routes the operations declare', () => {
    const declared = allOperations.flatMap((operation) => operation.rest.map((route) => `${route.method} ${route.path} → ${operation.name}`));
    expect(routes.map((route) => `${route.method} ${route.path} → ${route.operation.name}`).sort()).toEqual(declared.sort());
  });

  it('has no duplicate method and path', () => {
    const keys = routes.map((route) => `${route.method} ${route.path}`);
    expect(keys.filter((key, index) => keys.indexOf(key) !== index)).toEqual([]);
  });

  it('serves the legacy /v1/sdk-tokens family with the same operations as /v1/device-setup-tokens', () => {
    const find = (method: string, path: string) => routes.find((route) => route.method === method && route.path === path);
    for (const [method, modern, legacy] of [
      ['POST', '/v1/device-setup-tokens', '/v1/sdk-tokens'],
      ['GET', '/v1/device-setup-tokens', '/v1/sdk-tokens'],
      ['POST', '/v1/device-setup-tokens/{connectionId}/revoke', '/v1/sdk-tokens/{connectionId}/revoke'],
    ] as const) {
      const a = find(method, modern)!;
      const b = find(method, legacy)!;
      expect(b.operation).toBe(a.operation);
      expect(b.status).toBe(a.status);
    }
  });
});

describe('MCP fixed tools', () => {
  it('have unique names, none shaped like a device tool', () => {
    const names = allOperations.flatMap((operation) => (operation.mcp ? [operation.mcp.name] : []));
    expect(names.length).toBeGreaterThan(0);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).not.toContain('__');
  });

  it('advertise, where the schema differs from the input, the same fields, each of which the input takes', () => {
    const differing = allOperations.filter((operation) => operation.mcp?.advertisedInput);
    expect(differing.map((operation) => operation.mcp!.name)).toEqual(['schedule_action', 'broadcast']);
    for (const operation of differing) {
      const advertised = z.toJSONSchema(operation.mcp!.advertisedInput!, { io: 'input' }) as { properties: object; required: string[] };
      const own = z.toJSONSchema(operation.input, { io: 'input', unrepresentable: 'any' }) as { properties: object; required: string[] };
      expect(Object.keys(advertised.properties).sort()).toEqual(Object.keys(own.properties).sort());
      expect([...advertised.required].sort()).toEqual([...own.required].sort());
    }
    // A sample the advertised schema admits is the input it means.
    const sample = { deviceIds: [crypto.randomUUID()], capability: 'set_level', arguments: '{"level": 12}', idempotencyKey: 'k' };
    expect(operations.broadcast.mcp!.advertisedInput!.safeParse(sample).success).toBe(true);
    expect(operations.broadcast.input.parse(sample).arguments).toEqual({ level: 12 });
    const scheduled = { deviceId: crypto.randomUUID(), capability: 'set_level', arguments: '{"level": 12}', notBefore: Date.now() + 60_000 };
    expect(operations.scheduleAction.mcp!.advertisedInput!.safeParse(scheduled).success).toBe(true);
    expect(operations.scheduleAction.input.parse(scheduled).arguments).toEqual({ level: 12 });
  });
});
