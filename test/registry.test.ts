import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { CredentialKind } from '../src/domain/context.js';
import type { AccessRequirement, AnyOperation } from '../src/domain/operation.js';
import { allOperations } from '../src/domain/registry.js';
import { routes } from '../src/rest/routes.js';

/**
 * style.md habit 3: a test fails if an operation lacks its credential or access
 * declaration. `invoke` trusts these declarations, so a missing or odd one is a hole on
 * every surface built from the registry.
 */

// A Record over the union: adding a credential kind or access level without deciding here
// whether it is valid fails to compile.
const credentialKinds: Record<CredentialKind | 'public', true> = { public: true, owner: true, agent: true, setup: true, device: true };
const accessLevels: Record<AccessRequirement, true> = { none: true, read: true, act: true, 'per-function': true };

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
  return problems;
}

describe('operation registry', () => {
  it('holds operations', () => {
    expect(allOperations.length).toBeGreaterThan(10);
  });

  it.each(allOperations.map((operation) => [operation.name, operation] as const))('%s declares its credentials and access', (_name, operation) => {
    expect(declarationProblems(operation)).toEqual([]);
  });

  it('has unique operation names', () => {
    const names = allOperations.map((operation) => operation.name);
    expect(names.filter((name, index) => names.indexOf(name) !== index)).toEqual([]);
  });

  it('only health and the legacy board enrollment are open without a credential', () => {
    const open = allOperations.filter((operation) => operation.credentials.includes('public')).map((operation) => operation.name);
    expect(open.sort()).toEqual(['enrollments.enroll', 'health.get']);
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
  ])('fails an operation with %s', (_label, operation, problem) => {
    expect(declarationProblems(operation as unknown as AnyOperation)).toContain(problem);
  });
});

describe('REST routes', () => {
  const registered = new Set(allOperations);

  it.each(routes.map((route) => [`${route.method} ${route.path}`, route] as const))('%s calls a registry operation', (_label, route) => {
    expect(registered.has(route.operation)).toBe(true);
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
