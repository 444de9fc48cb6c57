import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Db, Queryable } from '../../store/driver.js';
import { findClient, upsertMetadataClient, type OAuthClientRow } from '../../store/oauth.js';
import { redirectUriProblem } from './redirects.js';
import { FairCache, type FairBounds } from '../fair-cache.js';

/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, the MCP
 * spec's preferred registration): the client_id is an HTTPS URL whose JSON document names
 * the client and its redirect URIs. Fetched through an SSRF-guarded fetcher (src/oauth/
 * cimd-fetch.ts) with a per-address and a concurrency budget (src/oauth/cimd-limits.ts).
 *
 * Anyone can make this server fetch a document (an anonymous authorization request names
 * it), so a fetched document is kept in a bounded in-memory cache, not in the database; it
 * becomes an oauth_clients row only when an owner approves the client (persistMetadataClient),
 * and from then on that row is its cache.
 */

export interface FetchedDocument {
  body: string;
  /** From the response's Cache-Control max-age, when it had one. */
  maxAgeSeconds: number | undefined;
}

/**
 * Fetches a document. Whatever it throws is logged, never shown: its message may name
 * internal hosts and addresses, so every failure is answered with FETCH_FAILED_MESSAGE.
 * A fetch refused by its budget throws FetchBudgetExceeded.
 */
export type DocumentFetcher = (url: URL) => Promise<FetchedDocument>;

/** The one answer to every failed fetch, so the answers cannot map this server's network. */
export const FETCH_FAILED_MESSAGE = "The client's metadata document could not be fetched.";

/** Too many fetches right now (from this address, or in flight overall): retry later. */
export class FetchBudgetExceeded extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super(`client metadata document fetches over budget; retry after ${retryAfterSeconds} s`);
    this.name = 'FetchBudgetExceeded';
  }
}

/**
 * How many fetched documents of not-yet-approved clients are kept in memory: 1,000 in all, 100
 * for one host. Anyone can name a document URL, so a host past its bound loses its own least
 * recently used documents, and past the total the host with the most loses first
 * (src/domain/fair-cache.ts): one host's documents never push out another's.
 */
export const CIMD_CACHE_BOUNDS: FairBounds = { perPartition: 100, total: 1000 };

/** The partition of a client id (a document URL): its host. */
const documentHost = (clientId: string): string => {
  try {
    return new URL(clientId).host;
  } catch {
    return clientId;
  }
};

/**
 * Documents of clients no owner has approved, within `CIMD_CACHE_BOUNDS`, each until its
 * freshness ends. Per process; a dropped entry costs a fetch.
 */
export class MetadataDocumentCache {
  private readonly entries: FairCache<OAuthClientRow>;
  constructor(bounds: FairBounds = CIMD_CACHE_BOUNDS) {
    this.entries = new FairCache(bounds);
  }

  get(clientId: string, now: number): OAuthClientRow | undefined {
    const host = documentHost(clientId);
    const entry = this.entries.get(host, clientId);
    if (!entry) return undefined;
    if (entry.freshUntil === null || entry.freshUntil <= now) {
      this.entries.delete(host, clientId);
      return undefined;
    }
    return entry;
  }

  set(row: OAuthClientRow): void {
    this.entries.set(documentHost(row.clientId), row.clientId, row);
  }

  delete(clientId: string): void {
    this.entries.delete(documentHost(clientId), clientId);
  }
}

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
 * The client for a document URL: an approved client's row while fresh (refreshed in place
 * when stale), else the in-memory cache's entry while fresh, else fetched, validated and
 * cached in memory. A client no owner approved is never written here. The fetch happens
 * outside any transaction (it waits on the network).
 */
export async function resolveMetadataClient(
  deps: { db: Db; now: number; fetchDocument: DocumentFetcher; cache: MetadataDocumentCache },
  url: URL,
): Promise<OAuthClientRow> {
  const stored = await findClient(deps.db, url.href);
  if (stored && stored.source !== 'metadata-document') throw new MetadataDocumentError('client_id is taken by another registration');
  if (stored && stored.freshUntil !== null && stored.freshUntil > deps.now) return stored;
  const cached = stored ? undefined : deps.cache.get(url.href, deps.now);
  if (cached) return cached;
  const fetched = await deps.fetchDocument(url);
  const doc = parseMetadataDocument(url, fetched.body);
  const maxAge = Math.min(CIMD_MAX_CACHE_SECONDS, Math.max(CIMD_MIN_CACHE_SECONDS, fetched.maxAgeSeconds ?? CIMD_DEFAULT_CACHE_SECONDS));
  const row: OAuthClientRow = {
    id: stored?.id ?? randomUUID(),
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
    createdAt: stored?.createdAt ?? deps.now,
    updatedAt: deps.now,
  };
  if (stored) return upsertMetadataClient(deps.db, row);
  deps.cache.set(row);
  return row;
}

/**
 * An owner approved a metadata-document client: its document, so far only in memory, is
 * stored (approveAuthorization calls this in its transaction, before linking a connection).
 */
export async function persistMetadataClient(db: Queryable, cache: MetadataDocumentCache, client: OAuthClientRow): Promise<void> {
  if (client.source !== 'metadata-document' || (await findClient(db, client.clientId))) return;
  await upsertMetadataClient(db, client);
  cache.delete(client.clientId);
}
