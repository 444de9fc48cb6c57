import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type { Hono } from 'hono';
import type { HttpEnv } from '../http/request.js';

/**
 * The console's icons, favicon and web app manifest, served by the service itself. Icons are
 * Lucide's (vendor/lucide-icons, ISC, copied by `npm run vendor:icons`); the favicon and the
 * manifest's PNGs are the console's own (src/console/static). Each file's path carries a hash
 * of its bytes, so it is cached for a year and a new version is a new path; the manifest and
 * the favicon keep fixed paths (browsers ask for them by name) and are revalidated.
 *
 * Read from the package root (like the migrations), so the compiled server finds the same files.
 */

const ROOT = new URL('../../', import.meta.url);

/** The icons the screens use, by the name a screen gives `Icon`. */
export const ICON_NAMES = [
  'activity',
  'bot',
  'check',
  'circle-pause',
  'circle-plus',
  'cpu',
  'gauge',
  'inbox',
  'key-round',
  'log-out',
  'network',
  'pause',
  'play',
  'search',
  'settings',
  'shield-check',
  'ticket',
  'trash-2',
  'webhook',
] as const;

export type IconName = (typeof ICON_NAMES)[number];

interface StaticFile {
  path: string;
  body: Buffer;
  type: string;
  cache: string;
}

const YEAR = 'public, max-age=31536000, immutable';
const hashOf = (body: Buffer) => createHash('sha256').update(body).digest('base64url').slice(0, 12);
const read = (relative: string) => fs.readFileSync(new URL(relative, ROOT));

function hashed(name: string, body: Buffer, type: string): StaticFile {
  return { path: `/console/assets/${name}-${hashOf(body)}.${type === 'image/png' ? 'png' : 'svg'}`, body, type, cache: YEAR };
}

const icons = new Map<IconName, StaticFile>(
  ICON_NAMES.map((name) => [name, hashed(`icons/${name}`, read(`vendor/lucide-icons/${name}.svg`), 'image/svg+xml')]),
);
const favicon = read('src/console/static/favicon.svg');
const png192 = hashed('icon-192', read('src/console/static/icon-192.png'), 'image/png');
const png512 = hashed('icon-512', read('src/console/static/icon-512.png'), 'image/png');

const manifest = Buffer.from(
  JSON.stringify({
    name: 'Device function control: owner console',
    short_name: 'Owner console',
    start_url: '/console',
    scope: '/console',
    display: 'standalone',
    background_color: '#ffffff',
    theme_color: '#1d4ed8',
    icons: [
      { src: '/console/favicon.svg', sizes: 'any', type: 'image/svg+xml' },
      { src: png192.path, sizes: '192x192', type: 'image/png' },
      { src: png512.path, sizes: '512x512', type: 'image/png' },
    ],
  }),
);

export const STATIC = {
  favicon: { path: '/console/favicon.svg', body: favicon, type: 'image/svg+xml', cache: 'public, max-age=86400' },
  png192,
  png512,
  manifest: { path: '/console/manifest.webmanifest', body: manifest, type: 'application/manifest+json', cache: 'public, max-age=86400' },
} satisfies Record<string, StaticFile>;

export const iconPath = (name: IconName): string => icons.get(name)!.path;

/** The style sheet's rules that draw each icon in the text colour (a CSS mask, so dark mode needs nothing more). */
export function iconRules(): string {
  return ICON_NAMES.map((name) => `.icon-${name} { --icon: url("${iconPath(name)}"); }`).join('\n');
}

export function mountIcons(app: Hono<HttpEnv>): void {
  for (const file of [...icons.values(), ...Object.values(STATIC)]) {
    app.get(file.path, (c) => c.body(new Uint8Array(file.body), 200, { 'Content-Type': file.type, 'Cache-Control': file.cache }));
  }
}
