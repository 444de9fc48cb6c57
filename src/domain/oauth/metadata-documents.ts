import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Db } from '../../store/driver.js';
import { findClient, upsertMetadataClient, type OAuthClientRow } from '../../store/oauth.js';
import { redirectUriProblem } from './redirects.js';

/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, the MCP
 * spec's preferred registration): the client_id is an HTTPS URL whose JSON document names
 * the client and its redirect URIs. Fetched through an SSRF-guarded fetcher (src/oauth/
 * cimd-fetch.ts) and cached in oauth_clients.
 */

export interface FetchedDocument {
  body: string;
  /** From the response's Cache-Control max-age, when it had one. */
  maxAgeSeconds: number | undefined;
}

/** Fetches a document; throws with a message safe to show the user when it cannot. */
export type DocumentFetcher = (url: URL) => Promise<FetchedDocument>;

export const CIMD_DEFAULT_CACHE_SECONDS = 3600;
const CIMD_MIN_CACHE_SECONDS = 60;
const CIMD_MAX_CACHE_SECONDS = 86_400;

/**
 * Whether a client_id names a metadata document: an https URL with a path (the draft's
 * rule). `allowLoopbackHttp` (OAUTH_CIMD_ALLOW_LOOPBACK, tests only) also admits
 * http://127.0.0.1-style URLs so a test can serve its document without TLS.
 */
export function metadataDocumentUrl(clientId: string, allowLoopbackHttp: boolean): URL | undefined {
  if (!/^https?:\/\//i.test(clientId)) return undefined;
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    return undefined;
  }
  if (url.pathname === '/' || url.hash !== '' || url.username !== '' || url.password !== '') return undefined;
  if (url.protocol === 'https:') return url;
  if (allowLoopbackHttp && url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) return url;
  return undefined;
}

const documentSchema = z.looseObject({
  client_id: z.string(),
  client_name: z.string().min(1).max(200).optional(),
  client_uri: z.url().optional(),
  redirect_uris: z.array(z.string()).min(1).max(20),
  token_endpoint_auth_method: z.string().optional(),
  client_secret: z.unknown().optional(),
});

export class MetadataDocumentError extends Error {}

/** Validates a fetched document against its URL: client_id must be the URL itself, and the client public. */
export function parseMetadataDocument(url: URL, text: string): { name: string; clientUri: string | null; redirectUris: string[] } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new MetadataDocumentError('the client metadata document is not JSON');
  }
  const parsed = documentSchema.safeParse(json);
  if (!parsed.success)
    throw new MetadataDocumentError(`the client metadata document is invalid: ${parsed.error.issues[0]?.path.join('.')} ${parsed.error.issues[0]?.message}`);
  const doc = parsed.data;
  if (doc.client_id !== url.href && doc.client_id !== url.toString()) {
    throw new MetadataDocumentError('the client metadata document names another client_id');
  }
  // A document anyone can read cannot hold a secret; this server supports no key-based
  // client authentication, so metadata-document clients are public (PKCE protects them).
  if (doc.client_secret !== undefined) throw new MetadataDocumentError('a client metadata document must not contain a client_secret');
  if (doc.token_endpoint_auth_method !== undefined && doc.token_endpoint_auth_method !== 'none') {
    throw new MetadataDocumentError('metadata-document clients must use token_endpoint_auth_method "none"');
  }
  for (const uri of doc.redirect_uris) {
    const problem = redirectUriProblem(uri);
    if (problem) throw new MetadataDocumentError(`redirect URI ${uri} ${problem}`);
  }
  return { name: doc.client_name ?? url.host, clientUri: doc.client_uri ?? null, redirectUris: doc.redirect_uris };
}

/**
 * The client row for a document URL: from the cache while fresh, else fetched, validated
 * and cached. The fetch happens outside any transaction (it waits on the network).
 */
export async function resolveMetadataClient(deps: { db: Db; now: number; fetchDocument: DocumentFetcher }, url: URL): Promise<OAuthClientRow> {
  const cached = await findClient(deps.db, url.href);
  if (cached && cached.source !== 'metadata-document') throw new MetadataDocumentError('client_id is taken by another registration');
  if (cached && cached.freshUntil !== null && cached.freshUntil > deps.now) return cached;
  const fetched = await deps.fetchDocument(url);
  const doc = parseMetadataDocument(url, fetched.body);
  const maxAge = Math.min(CIMD_MAX_CACHE_SECONDS, Math.max(CIMD_MIN_CACHE_SECONDS, fetched.maxAgeSeconds ?? CIMD_DEFAULT_CACHE_SECONDS));
  return upsertMetadataClient(deps.db, {
    id: cached?.id ?? randomUUID(),
    clientId: url.href,
    source: 'metadata-document',
    workspaceId: null,
    name: doc.name,
    clientUri: doc.clientUri,
    redirectUris: doc.redirectUris,
    public: true,
    secretHash: null,
    secretPrefix: null,
    freshUntil: deps.now + maxAge * 1000,
    createdAt: cached?.createdAt ?? deps.now,
    updatedAt: deps.now,
  });
}
