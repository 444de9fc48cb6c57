import { randomUUID } from 'node:crypto';
import { assertWithinCap } from '../capacity.js';
import { z } from 'zod';
import { hashToken, issueToken } from '../tokens.js';
import { insertConnection } from '../../store/connections.js';
import {
  clientConnectionByClientId,
  getClientConnection,
  insertClient,
  linkConnection,
  listClientConnections,
  revokeClientConnection,
  type OAuthConnectionRow,
} from '../../store/oauth.js';
import { publishActions } from '../action-publishing.js';
import { withdrawRevoked } from '../action-withdrawals.js';
import { toConnection } from '../connections.js';
import { fail } from '../errors.js';
import { defaultPrincipal } from './clients.js';
import { redirectUriProblem } from './redirects.js';
import { defineOperation, definePagedOperation } from '../operation.js';
import { NEWEST_FIRST_KEY } from '../paging.js';
import { access, connection, newConnection, principal } from '../schemas.js';

/**
 * OAuth clients as the owner sees them (docs/reference/rules.md "OAuth" and "Access"): each is
 * an agent connection with an `oauth` object and a principal. Pre-registered clients are
 * made here; dynamic and metadata-document clients get their connection when an owner
 * first approves them on the consent page, and are listed and revoked here too. How the
 * authorization server finds and authenticates a client during the flow is in clients.ts.
 */

function toClientConnection(row: OAuthConnectionRow, now: number): z.input<typeof connection> {
  const oauth = { applicationId: row.applicationId, clientId: row.clientId, redirectUris: row.redirectUris, public: row.public };
  return toConnection({ ...row, purpose: 'agent', deviceLimit: 0, attachedCount: 0, oauth }, now);
}

const redirectUri = z
  .string()
  .superRefine((uri, ctx) => {
    const problem = redirectUriProblem(uri);
    if (problem) ctx.addIssue({ code: 'custom', message: `redirect URI ${problem}` });
  })
  .describe('Matched exactly at authorization time: https, or http on a loopback address.');

export const createOAuthClient = defineOperation({
  name: 'oauthClients.create',
  title: 'Pre-register an OAuth client',
  description:
    'Pre-register an OAuth client for this workspace: an agent connection whose tokens come from the authorization code flow, or, for a confidential client, from the `client_credentials` grant (a server-to-server agent with no person at a browser). A confidential client receives its client secret once, as `token`; a public client (PKCE only) has none: its `token` is null.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false },
  rest: [{ method: 'POST', path: '/v1/oauth-clients', status: 201 }],
  input: z
    .strictObject({
      name: z.string().min(1).max(64),
      redirectUris: z
        .array(redirectUri)
        .max(10)
        .default([])
        .describe(
          'Where the authorization code flow may send the owner back. At least one for a public client; a confidential client may have none, and then gets its tokens with the `client_credentials` grant only.',
        ),
      public: z.boolean().default(false).describe('True for a client that cannot keep a secret (desktop, CLI): it authenticates with PKCE only.'),
      access: access.default('read').describe('The ceiling: scopes the owner approves, and those a `client_credentials` token carries, are capped by it.'),
      principal: principal.optional().describe('Defaults to `oauth:<client id>`. Grants name this principal.'),
    })
    .superRefine((input, check) => {
      // A public client has only the authorization code flow, which needs somewhere to return to.
      if (input.public && input.redirectUris.length === 0) {
        check.addIssue({ code: 'custom', path: ['redirectUris'], message: 'a public client needs at least one redirect URI' });
      }
    }),
  // A public client has no secret to show: its `token` is null rather than absent, so the
  // field NewConnection requires is always there (docs/decisions/0001-public-oauth-client-token.md).
  output: newConnection.extend({
    token: z
      .string()
      .nullable()
      .describe('The client secret of a confidential client, returned once only; null for a public client, which has none (it proves itself with PKCE).'),
  }),
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const applicationId = randomUUID();
    const clientId = randomUUID();
    const connectionId = randomUUID();
    const secret = input.public ? undefined : issueToken('clientSecret');
    await ctx.db.transaction(async (tx) => {
      await insertClient(tx, {
        id: applicationId,
        clientId,
        source: 'registered',
        workspaceId: credential.workspaceId,
        name: input.name,
        clientUri: null,
        redirectUris: input.redirectUris,
        public: input.public,
        secretHash: secret?.hash ?? null,
        secretPrefix: secret?.displayPrefix ?? null,
        freshUntil: null,
        createdAt: now,
        updatedAt: now,
      });
      await insertConnection(tx, {
        id: connectionId,
        workspaceId: credential.workspaceId,
        purpose: 'agent',
        name: input.name,
        principal: input.principal ?? defaultPrincipal(clientId, applicationId),
        access: input.access,
        // The connection itself has no bearer token: a random hash no token can match.
        tokenHash: hashToken(randomUUID()),
        tokenPrefix: secret?.displayPrefix ?? '',
        deviceLimit: 0,
        expiresAt: null,
        createdBy: credential.subject,
        createdAt: now,
      });
      await linkConnection(tx, connectionId, applicationId);
      await assertWithinCap(tx, ctx.settings.capacity, 'oauthClients', credential.workspaceId, now);
      await assertWithinCap(tx, ctx.settings.capacity, 'agentConnections', credential.workspaceId, now);
    });
    const row = (await getClientConnection(ctx.db, connectionId))!;
    return { ...toClientConnection(row, now), token: secret?.token ?? null };
  },
});

export const listOAuthClients = definePagedOperation({
  name: 'oauthClients.list',
  title: 'List OAuth clients',
  description:
    'List the OAuth clients of this workspace, newest first: pre-registered ones and those an owner approved on the consent page (dynamic registration or client metadata documents).',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/oauth-clients' }],
  input: z.strictObject({}),
  output: z.array(connection),
  paged: { key: NEWEST_FIRST_KEY },
  async run({ ctx, credential, page }) {
    const now = ctx.clock.now();
    const { rows, next } = await listClientConnections(ctx.db, credential.workspaceId, page);
    return { items: rows.map((row) => toClientConnection(row, now)), next };
  },
});

export const revokeOAuthClient = defineOperation({
  name: 'oauthClients.revoke',
  title: 'Revoke an OAuth client',
  description:
    "Revoke an OAuth client in this workspace: its access and refresh tokens answer 401 from the next request on, its queued commands are cancelled and handed-out ones recalled. The principal's grants stay.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: true },
  rest: [{ method: 'POST', path: '/v1/oauth-clients/{clientId}/revoke' }],
  input: z.strictObject({ clientId: z.string().min(1).max(512).describe('The OAuth client_id (URL-encoded when it is a metadata document URL).') }),
  output: connection,
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const { row, withdrawn } = await ctx.db.transaction(async (tx) => {
      const found = await clientConnectionByClientId(tx, credential.workspaceId, input.clientId);
      if (!found) throw fail.notFound('OAuth client');
      await revokeClientConnection(tx, credential.workspaceId, found.id, now);
      // The client's commands stop with it (docs/reference/rules.md "Actions"). Revoking one token at
      // /oauth/revoke is not this: the client keeps its connection and its commands.
      const withdrawn = await withdrawRevoked(tx, { workspaceId: credential.workspaceId, connectionId: found.id }, now);
      return { row: (await getClientConnection(tx, found.id))!, withdrawn };
    });
    publishActions(ctx, withdrawn);
    return toClientConnection(row, now);
  },
});
