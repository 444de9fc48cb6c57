import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Every decision record in docs/decisions has one shape (docs/decisions/README.md): a numbered
 * title, then Status, Context, Decision and Consequences in that order, the last naming the test
 * that pins the decision by its file and its words.
 */
const root = path.resolve(import.meta.dirname, '../..');
const folder = path.join(root, 'docs/decisions');
const records = fs
  .readdirSync(folder)
  .filter((file) => /^\d{4}-.+\.md$/.test(file))
  .sort()
  .map((file) => ({ file, text: fs.readFileSync(path.join(folder, file), 'utf8') }));

const SECTIONS = ['Status', 'Context', 'Decision', 'Consequences'];

/** The text of each `## ` section, keyed by its heading, outside fenced code. */
function sections(text: string): Map<string, string> {
  const found = new Map<string, string>();
  const parts = text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '').split(/^## +(.+)$/m);
  for (let i = 1; i < parts.length; i += 2) found.set(parts[i]!.trim(), parts[i + 1]!.trim());
  return found;
}

/** `test/…` ("a test's name", "another") pairs: each file with the names quoted after it. */
function pins(consequences: string): { file: string; names: string[] }[] {
  const flat = consequences.replace(/\s*\n\s*/g, ' ');
  return [...flat.matchAll(/`(test\/[^`]+\.tsx?)`(?: \(((?:[^()]|\([^()]*\))*)\))?/g)].map((m) => ({
    file: m[1]!,
    names: [...(m[2] ?? '').matchAll(/"([^"]+)"/g)].map((n) => n[1]!),
  }));
}

describe('decision records', () => {
  it('are all there, numbered without a gap', () => {
    expect(records.length).toBeGreaterThanOrEqual(31);
    expect(records.map((r) => r.file.slice(0, 4))).toEqual(records.map((_r, i) => String(i + 1).padStart(4, '0')));
  });

  it.each(records.map((r) => [r.file, r] as const))('%s has a numbered title, then Status, Context, Decision, Consequences', (_file, record) => {
    expect(record.text.split('\n')[0]).toMatch(new RegExp(`^# ${record.file.slice(0, 4)} \\S`));
    const found = sections(record.text);
    expect([...found.keys()]).toEqual(SECTIONS);
    for (const section of SECTIONS) expect(found.get(section), section).not.toBe('');
    expect(found.get('Status')).toMatch(/^Accepted, \d{4}-\d{2}-\d{2}/);
  });

  it.each(records.map((r) => [r.file, r] as const))('%s names the test that pins it, and the test has those words', (_file, record) => {
    const named = pins(sections(record.text).get('Consequences') ?? '');
    expect(named.length).toBeGreaterThan(0);
    for (const pin of named) {
      const source = fs.readFileSync(path.join(root, pin.file), 'utf8');
      for (const name of pin.names) expect(source, `${pin.file} "${name}"`).toContain(name);
    }
  });

  it('are each listed in docs/decisions/README.md', () => {
    const index = fs.readFileSync(path.join(folder, 'README.md'), 'utf8');
    expect(records.filter((r) => !index.includes(`](${r.file})`)).map((r) => r.file)).toEqual([]);
  });

  it('finds a pin and its names (a self-check, on this sentence)', () => {
    expect(pins('Pinned by `test/a/b.test.ts` ("one (1)", and\n"two") and `test/c.test.tsx`.')).toEqual([
      { file: 'test/a/b.test.ts', names: ['one (1)', 'two'] },
      { file: 'test/c.test.tsx', names: [] },
    ]);
  });
});
