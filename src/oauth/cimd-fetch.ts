import { lookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP } from 'node:net';
import type { DocumentFetcher } from '../domain/oauth/metadata-documents.js';

/**
 * Fetches Client ID Metadata Documents without letting a client_id turn this server into a
 * proxy into its own network (SSRF): the host is resolved first, every address it resolves
 * to must be public, and the connection is pinned to the checked address so a second DNS
 * answer cannot swap in another one (DNS rebinding). No redirects, a 5 KiB body limit and a
 * 3 s deadline for the whole exchange.
 */

export const CIMD_MAX_BYTES = 5 * 1024;
export const CIMD_TIMEOUT_MS = 3000;

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata endpoints live here)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  blocked.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b::', 96], // NAT64
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const) {
  blocked.addSubnet(net, prefix, 'ipv6');
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** Whether an address may be fetched; `allowLoopback` is the test-only OAUTH_CIMD_ALLOW_LOOPBACK. */
export function isFetchableAddress(address: string, allowLoopback = false): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (allowLoopback && LOOPBACK.check(address, type)) return true;
  // BlockList matches IPv4-mapped IPv6 addresses (::ffff:10.0.0.1) against the IPv4 rules.
  return !blocked.check(address, type);
}

export class DocumentFetchError extends Error {}

export function createDocumentFetcher(options: { allowLoopback: boolean; timeoutMs?: number; maxBytes?: number }): DocumentFetcher {
  const timeoutMs = options.timeoutMs ?? CIMD_TIMEOUT_MS;
  const maxBytes = options.maxBytes ?? CIMD_MAX_BYTES;
  return async (url) => {
    const deadline = AbortSignal.timeout(timeoutMs);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true, verbatim: true });
    if (deadline.aborted) throw new DocumentFetchError('timed out');
    if (addresses.length === 0) throw new DocumentFetchError('the host does not resolve');
    for (const { address } of addresses) {
      if (!isFetchableAddress(address, options.allowLoopback)) throw new DocumentFetchError('the host resolves to a non-public address');
    }
    const pinned = addresses[0]!;
    const client = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const request = client.request(
        url,
        {
          method: 'GET',
          headers: { accept: 'application/json' },
          signal: deadline,
          // Connect to the address checked above, not to whatever a second lookup returns.
          lookup: (_hostname, lookupOptions, callback) => {
            if ((lookupOptions as { all?: boolean }).all) callback(null, [{ address: pinned.address, family: pinned.family }]);
            else callback(null, pinned.address, pinned.family);
          },
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
