import { createHmac, timingSafeEqual } from 'node:crypto';
import { hashToken, issueToken } from './tokens.js';
import { deleteSession, findSession, insertSession } from '../store/owner-sessions.js';
import type { Db } from '../store/driver.js';
import { workspaceForOwner } from '../store/workspaces.js';
import type { Clock } from './context.js';

/**
 * Owner sessions of the browser: the owner signs in once (the sign-in page in src/oauth, or the
 * owner console's sign-in in src/console) and approves requests or uses the console under one
 * session cookie; their forms carry a CSRF token derived from it.
 */

export const SESSION_MAX_TTL_MS = 8 * 3_600_000;

export interface OwnerSession {
  workspaceId: string;
  subject: string;
}

/** A session as a request finds it: who, until when, and the hash it is stored under. */
export interface LiveOwnerSession extends OwnerSession {
  expiresAt: number;
  tokenHash: string;
}

/** What sessions need: the console hands in just these, the authorization server its own deps. */
export interface SessionStoreDeps {
  db: Db;
  clock: Clock;
}

export async function createOwnerSession(
  deps: SessionStoreDeps,
  owner: OwnerSession,
  notAfter: number | undefined,
): Promise<{ token: string; expiresAt: number }> {
  const now = deps.clock.now();
  const session = issueToken('session');
  // A session never outlives the owner JWT it was made from, nor eight hours.
  const expiresAt = Math.min(now + SESSION_MAX_TTL_MS, notAfter ?? Number.POSITIVE_INFINITY);
  await insertSession(deps.db, { tokenHash: session.hash, workspaceId: owner.workspaceId, subject: owner.subject, expiresAt, createdAt: now });
  return { token: session.token, expiresAt };
}

/**
 * A session for an owner whose identity an OpenID provider vouched for (the console's sign-in):
 * the workspace claim names the workspace exactly as an owner JWT's does (first use creates it).
 */
export async function createOwnerSessionForIdentity(
  deps: SessionStoreDeps,
  identity: { subject: string; workspaceKey: string },
  notAfter: number | undefined,
): Promise<{ token: string; expiresAt: number }> {
  const workspace = await workspaceForOwner(deps.db, identity.workspaceKey, deps.clock.now());
  return createOwnerSession(deps, { workspaceId: workspace.id, subject: identity.subject }, notAfter);
}

export async function ownerSession(deps: SessionStoreDeps, token: string | undefined): Promise<LiveOwnerSession | undefined> {
  if (!token) return undefined;
  const row = await findSession(deps.db, hashToken(token));
  if (!row || row.expiresAt <= deps.clock.now()) return undefined;
  return { workspaceId: row.workspaceId, subject: row.subject, expiresAt: row.expiresAt, tokenHash: row.tokenHash };
}

export async function endOwnerSession(deps: SessionStoreDeps, token: string | undefined): Promise<void> {
  if (token) await deleteSession(deps.db, hashToken(token));
}

/** The CSRF token of a session: derived from the session secret, so it is bound to it and needs no storage. */
export function csrfToken(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('dfc consent csrf').digest('base64url');
}

export function csrfMatches(sessionToken: string, presented: string | undefined): boolean {
  if (!presented) return false;
  const a = Buffer.from(csrfToken(sessionToken));
  const b = Buffer.from(presented);
  return a.length === b.length && timingSafeEqual(a, b);
}
