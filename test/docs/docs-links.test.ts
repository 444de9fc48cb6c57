import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Every relative link in the README, docs/ and the packages' READMEs reaches a file in the
 * repository, and every `#anchor` a heading of its page (GitHub's slugs). Links to other sites
 * are not followed: the test runs without a network.
 */
const root = path.resolve(import.meta.dirname, '../..');
const pages = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'README.md', 'docs', 'packages/*/README.md'], {
  cwd: root,
  encoding: 'utf8',
})
  .split('\n')
  .filter((file) => file.endsWith('.md') && fs.existsSync(path.join(root, file)));

/** The page without its fenced code blocks and inline code, where brackets are not links. */
function prose(text: string): string {
  return text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's heading slug: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

function anchors(file: string): Set<string> {
  const text = fs.readFileSync(file, 'utf8').replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '');
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const [, heading] of text.matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = slug(heading!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    found.add(count === 0 ? base : `${base}-${count}`);
  }
  for (const [, id] of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(id!);
  return found;
}

interface Link {
  page: string;
  target: string;
}

const links: Link[] = pages.flatMap((page) =>
  [...prose(fs.readFileSync(path.join(root, page), 'utf8')).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)]
    .map((m) => ({ page, target: m[1]! }))
    .filter((link) => !/^[a-z][a-z0-9+.-]*:/i.test(link.target)),
);

describe('links in the docs', () => {
  it('are found in every page', () => {
    expect(pages).toContain('README.md');
    expect(pages).toContain('docs/README.md');
    expect(links.length).toBeGreaterThan(150);
  });

  it.each(links.map((link) => [`${link.page} → ${link.target}`, link] as const))('%s resolves', (_label, link) => {
    const [file, anchor] = link.target.split('#') as [string, string | undefined];
    const target = file === '' ? path.join(root, link.page) : path.resolve(path.dirname(path.join(root, link.page)), decodeURIComponent(file));
    expect(target.startsWith(root + path.sep), 'stays inside the repository').toBe(true);
    expect(fs.existsSync(target), `${path.relative(root, target)} exists`).toBe(true);
    if (anchor !== undefined) {
      expect(target.endsWith('.md'), 'an anchor points into a Markdown page').toBe(true);
      expect([...anchors(target)], `#${anchor} is a heading of ${path.relative(root, target)}`).toContain(anchor);
    }
  });
});

describe('GitHub heading slugs', () => {
  it.each([
    ['Walk-through: grant → action → next → result', 'walk-through-grant--action--next--result'],
    ['Pointing `DATABASE_URL` at sqld or Turso', 'pointing-database_url-at-sqld-or-turso'],
    ['Request rules (checked in this order, before the SDK sees the request)', 'request-rules-checked-in-this-order-before-the-sdk-sees-the-request'],
    ['Measured: 1,000 round trips', 'measured-1000-round-trips'],
    ['A simulated device: `npm run device`', 'a-simulated-device-npm-run-device'],
  ])('%s → #%s', (heading, expected) => {
    expect(slug(heading)).toBe(expected);
  });
});
