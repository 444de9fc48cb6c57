import http from 'node:http';
import https from 'node:https';
import type { DocumentFetcher } from '../domain/oauth/metadata-documents.js';
import { BlockedAddressError, pinnedLookup, resolvePublicAddress, type PinnedAddress } from '../http/ssrf.js';

/**
 * Fetches Client ID Metadata Documents without letting a client_id turn this server into a
 * proxy into its own network (SSRF): through the shared guard of src/http/ssrf.ts (public
 * addresses only, the connection pinned to the checked one). No redirects, a 5 KiB body limit and a
 * 3 s deadline for the whole exchange.
 */

export const CIMD_MAX_BYTES = 5 * 1024;
export const CIMD_TIMEOUT_MS = 3000;

export class DocumentFetchError extends Error {}

export function createDocumentFetcher(options: { allowLoopback: boolean; timeoutMs?: number; maxBytes?: number }): DocumentFetcher {
  const timeoutMs = options.timeoutMs ?? CIMD_TIMEOUT_MS;
  const maxBytes = options.maxBytes ?? CIMD_MAX_BYTES;
  return async (url) => {
    const deadline = AbortSignal.timeout(timeoutMs);
    let pinned: PinnedAddress;
    try {
      pinned = await resolvePublicAddress(url, options.allowLoopback, deadline);
    } catch (error) {
      throw error instanceof BlockedAddressError ? new DocumentFetchError(error.message) : error;
    }
    const client = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const request = client.request(
        url,
        {
          method: 'GET',
          headers: { accept: 'application/json' },
          signal: deadline,
          // Connect to the address checked above, not to whatever a second lookup returns.
          lookup: pinnedLookup(pinned),
        },
        (response) => {
          const status = response.statusCode ?? 0;
          if (status !== 200) {
            response.resume();
            reject(new DocumentFetchError(`the document answered HTTP ${status}`));
            return;
          }
          const type = String(response.headers['content-type'] ?? '');
          if (!/^application\/([a-z.+-]*\+)?json\b/i.test(type)) {
            response.resume();
            reject(new DocumentFetchError('the document is not application/json'));
            return;
          }
          const declared = Number(response.headers['content-length'] ?? '0');
          if (declared > maxBytes) {
            response.destroy();
            reject(new DocumentFetchError(`the document is larger than ${maxBytes} bytes`));
            return;
          }
          const chunks: Buffer[] = [];
          let total = 0;
          response.on('data', (chunk: Buffer) => {
            total += chunk.length;
            if (total > maxBytes) {
              response.destroy();
              reject(new DocumentFetchError(`the document is larger than ${maxBytes} bytes`));
              return;
            }
            chunks.push(chunk);
          });
          response.on('end', () => {
            const cacheControl = String(response.headers['cache-control'] ?? '');
            const maxAge = /(?:^|,)\s*max-age=(\d+)/i.exec(cacheControl);
            resolve({
              body: Buffer.concat(chunks).toString('utf8'),
              maxAgeSeconds: /no-store|no-cache/i.test(cacheControl) ? 0 : maxAge ? Number(maxAge[1]) : undefined,
            });
          });
          response.on('error', (error) => reject(new DocumentFetchError(error.message)));
        },
      );
      request.on('error', (error) => reject(new DocumentFetchError(deadline.aborted ? 'timed out' : error.message)));
      request.end();
    });
  };
}
