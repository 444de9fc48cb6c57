import { lookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import type { PrivateHostAllowance } from '../domain/webhook-transport.js';

/**
 * The guard against server-side request forgery (SSRF) for every request this service makes
 * to a URL someone else chose: OAuth client metadata documents (src/oauth/cimd-fetch.ts) and
 * webhooks (src/http/webhook-transport.ts). A URL's host is resolved first, every address it
 * resolves to must be public, and the connection is pinned to the checked address
 * (`pinnedLookup`) so a second DNS answer cannot swap in another one (DNS rebinding).
 * Webhooks also reach the private hosts an operator lists (WEBHOOK_ALLOW_PRIVATE_HOSTS,
 * `resolveAllowedAddress`), pinned the same way.
 */

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
  ['192.88.99.0', 24], // 6to4 relay anycast (RFC 7526)
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
  // IPv4-compatible addresses (deprecated, RFC 4291 §2.5.5.1), with :: and ::1 among them.
  ['::', 96],
  // Local-use NAT64 (RFC 8215): its prefix length, so where the IPv4 sits, is the network's choice.
  ['64:ff9b:1::', 48],
  ['100::', 64], // discard
  // Teredo (RFC 4380): the client's IPv4 address is obfuscated and the relay is not ours to judge.
  ['2001::', 32],
  ['2001:2::', 48], // benchmarking
  ['2001:10::', 28], // ORCHID
  ['2001:20::', 28], // ORCHIDv2
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation (RFC 9637)
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  blocked.addSubnet(net, prefix, 'ipv6');
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** The 16 bytes of an IPv6 address (`isIP` already said it is one), zone id dropped. */
function ipv6Bytes(address: string): Uint8Array {
  let text = address.replace(/%.*$/, '');
  const bytes = new Uint8Array(16);
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    // a trailing dotted quad is the last 32 bits: rewrite it as two hex groups
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, undefined];
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
  groups.forEach((group, i) => {
    const value = parseInt(group, 16);
    bytes[2 * i] = value >> 8;
    bytes[2 * i + 1] = value & 0xff;
  });
  return bytes;
}

const startsWith = (bytes: Uint8Array, prefix: readonly number[]) => prefix.every((value, i) => bytes[i] === value);
const ipv4At = (bytes: Uint8Array, offset: number) => Array.from(bytes.subarray(offset, offset + 4)).join('.');

/**
 * The IPv4 address an IPv6 address stands for, where connecting to it reaches that IPv4
 * address: IPv4-mapped `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2, in any spelling, e.g.
 * `::ffff:7f00:1`), IPv4-translated `::ffff:0:a.b.c.d` (RFC 2765), NAT64's well-known prefix
 * `64:ff9b::/96` (RFC 6052) and 6to4 `2002:AABB:CCDD::/48` (RFC 3056).
 */
export function embeddedIpv4(address: string): string | undefined {
  const bytes = ipv6Bytes(address);
  const zeros = (n: number) => Array<number>(n).fill(0);
  if (startsWith(bytes, [...zeros(10), 0xff, 0xff])) return ipv4At(bytes, 12);
  if (startsWith(bytes, [...zeros(8), 0xff, 0xff, 0, 0])) return ipv4At(bytes, 12);
  if (startsWith(bytes, [0, 0x64, 0xff, 0x9b, ...zeros(8)])) return ipv4At(bytes, 12);
  if (startsWith(bytes, [0x20, 0x02])) return ipv4At(bytes, 2);
  return undefined;
}

/**
 * Whether an address may be fetched; `allowLoopback` is the test-only OAUTH_CIMD_ALLOW_LOOPBACK.
 * An IPv6 address that embeds an IPv4 address is judged by the IPv4 address too, so no
 * spelling of 127.0.0.1 or 10.0.0.1 gets through; the forms whose IPv4 part cannot be told
 * (IPv4-compatible, Teredo, local-use NAT64) are refused as ranges.
 */
export function isFetchableAddress(address: string, allowLoopback = false): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  if (family === 4) return (allowLoopback && LOOPBACK.check(address, 'ipv4')) || !blocked.check(address, 'ipv4');
  const bare = address.replace(/%.*$/, '');
  if (allowLoopback && LOOPBACK.check(bare, 'ipv6')) return true;
  if (blocked.check(bare, 'ipv6')) return false;
  const ipv4 = embeddedIpv4(bare);
  return ipv4 === undefined || isFetchableAddress(ipv4, allowLoopback);
}

export class BlockedAddressError extends Error {}

/** A checked address to connect to. */
export interface PinnedAddress {
  address: string;
  family: number;
}

/** The addresses a URL's host stands for: itself when it is an address, else what DNS answers now. */
async function resolveHost(url: URL, signal?: AbortSignal): Promise<PinnedAddress[]> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true, verbatim: true });
  if (signal?.aborted) throw new BlockedAddressError('timed out');
  if (addresses.length === 0) throw new BlockedAddressError('the host does not resolve');
  return addresses;
}

/**
 * Resolves a URL's host and checks every address it resolves to (`allowLoopback`: the
 * test-only OAUTH_CIMD_ALLOW_LOOPBACK); answers the address to pin the connection to, or
 * throws a BlockedAddressError saying why not.
 */
export async function resolvePublicAddress(url: URL, allowLoopback: boolean, signal?: AbortSignal): Promise<PinnedAddress> {
  const addresses = await resolveHost(url, signal);
  for (const { address } of addresses) {
    if (!isFetchableAddress(address, allowLoopback)) throw new BlockedAddressError('the host resolves to a non-public address');
  }
  return addresses[0]!;
}

/** The private hosts an operator allows (WEBHOOK_ALLOW_PRIVATE_HOSTS), ready to check against. */
export interface PrivateHosts {
  names: ReadonlySet<string>;
  ranges: BlockList;
  /** Whether anything is listed at all. */
  any: boolean;
}

export function privateHosts(allowance: PrivateHostAllowance): PrivateHosts {
  const ranges = new BlockList();
  for (const range of allowance.ranges) ranges.addSubnet(range.address, range.prefix, range.family);
  return { names: new Set(allowance.names), ranges, any: allowance.names.length + allowance.ranges.length > 0 };
}

/** Whether an address lies in a listed range; an IPv6 address that stands for an IPv4 one is judged by either. */
function inRanges(address: string, allowed: PrivateHosts): boolean {
  const bare = address.replace(/%.*$/, '');
  if (isIP(bare) === 4) return allowed.ranges.check(bare, 'ipv4');
  if (allowed.ranges.check(bare, 'ipv6')) return true;
  const ipv4 = embeddedIpv4(bare);
  return ipv4 !== undefined && allowed.ranges.check(ipv4, 'ipv4');
}

/**
 * `resolvePublicAddress` with an operator's private hosts allowed too: a URL whose host is a
 * listed name, or whose every address lies in a listed range, is `listed` (and may then be
 * reached over http); otherwise each address must be public or in a listed range. Answers the
 * address to pin the connection to, or throws a BlockedAddressError saying why not.
 */
export async function resolveAllowedAddress(
  url: URL,
  options: { allowLoopback: boolean; privateHosts: PrivateHosts },
  signal?: AbortSignal,
): Promise<{ pinned: PinnedAddress; listed: boolean }> {
  const addresses = await resolveHost(url, signal);
  const { privateHosts: allowed } = options;
  const name = url.hostname.replace(/\.$/, '').toLowerCase();
  if (allowed.names.has(name) || addresses.every(({ address }) => inRanges(address, allowed))) {
    return { pinned: addresses[0]!, listed: true };
  }
  for (const { address } of addresses) {
    if (!isFetchableAddress(address, options.allowLoopback) && !inRanges(address, allowed)) {
      throw new BlockedAddressError('the host resolves to a non-public address');
    }
  }
  return { pinned: addresses[0]!, listed: false };
}

/** The `lookup` option of node:http(s) requests that connects to `pinned`, whatever the host's DNS says now. */
export function pinnedLookup(pinned: PinnedAddress): LookupFunction {
  return (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all) callback(null, [{ address: pinned.address, family: pinned.family }]);
    else callback(null, pinned.address, pinned.family);
  };
}
