/** Debian's Chromium, which the browser tests drive with playwright-core (docs/contributors/development.md "Set up"). */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * The flags every browser test starts Chromium with: as root, without a GPU, and without the
 * background connections (updates, sync, QUIC probes) that this machine's closed network
 * refuses, many at a time.
 */
export const CHROMIUM_ARGS: readonly string[] = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
