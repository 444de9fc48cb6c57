import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';

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

/** axe-core's serious and critical findings on the page as it stands, one line each. */
export async function axeViolations(tab: Page): Promise<string[]> {
  const source = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await tab.addScriptTag({ content: source });
  const results = (await tab.evaluate('axe.run(document, { resultTypes: ["violations"] })')) as {
    violations: { id: string; impact: string; nodes: { target: string[] }[] }[];
  };
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}
