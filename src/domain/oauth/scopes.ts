import type { Access } from '../context.js';
import { oauthError } from './errors.js';

/**
 * Scopes: a ceiling only (docs/reference/rules.md "Access"); `act` implies `read`. Apart because the
 * authorization and token endpoints and the bearer check in src/auth all read them.
 */

export const SCOPES = ['read', 'act'] as const;

/** Parses a scope string into the access it asks for; empty means `read`. */
export function parseScope(scope: string | undefined): Access {
  const names = (scope ?? '').split(' ').filter((s) => s !== '');
  for (const name of names) {
    if (!(SCOPES as readonly string[]).includes(name)) throw oauthError('invalid_scope', `Unknown scope "${name}". Scopes are read and act.`);
  }
  return names.includes('act') ? 'act' : 'read';
}

export const scopeString = (access: Access): string => (access === 'act' ? 'read act' : 'read');
export const scopesOf = (access: Access): Access[] => (access === 'act' ? ['read', 'act'] : ['read']);
export const lowerAccess = (a: Access, b: Access): Access => (a === 'act' && b === 'act' ? 'act' : 'read');
