/**
 * Which redirect URIs a client may register: https anywhere, or plain http only on a
 * loopback address (RFC 8252 §7.3, native clients listening on this computer). Matching at
 * authorization time is exact string equality (docs/reference/rules.md "OAuth"), no port wildcard.
 */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

export function isLoopbackRedirect(uri: string): boolean {
  try {
    const url = new URL(uri);
    return url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname);
  } catch {
    return false;
  }
}

/** Why a redirect URI cannot be registered, or undefined when it can. */
export function redirectUriProblem(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'is not an absolute URI';
  }
  if (uri.length > 512) return 'is longer than 512 characters';
  if (url.hash !== '' || uri.includes('#')) return 'must not have a fragment';
  if (url.username !== '' || url.password !== '') return 'must not carry user information';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname)) return undefined;
  return 'must be https, or http on a loopback address';
}
