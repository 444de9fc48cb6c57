import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Comments and the README cite the project's own docs (docs/reference/rules.md and a section title), never
 * documents outside the repository: a stranger's clone has only what is in it.
 */
const root = path.resolve(import.meta.dirname, '../..');
const tracked = execFileSync(
  'git',
  [
    'ls-files',
    '--cached',
    '--others',
    '--exclude-standard',
    'src',
    'test',
    'scripts',
    'README.md',
    'docs',
    'packages/*/README.md',
    'packages/*/src',
    'Dockerfile',
    '.ci',
  ],
  {
    cwd: root,
    encoding: 'utf8',
  },
)
  .split('\n')
  .filter((file) => /\.(ts|tsx|mjs|sh|sql|md)$|^Dockerfile$|^\.ci\/run$/.test(file) && fs.existsSync(path.join(root, file)));

function headings(file: string): Set<string> {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  return new Set([...text.matchAll(/^#{1,4} (.+)$/gm)].map((m) => m[1]!.trim()));
}

const citations = tracked.flatMap((file) => {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  return [...text.matchAll(/docs\/([a-z0-9/-]+)\.md[\s*/-]*"([^"]+)"/g)].map((m) => ({
    file,
    doc: `docs/${m[1]}.md`,
    section: m[2]!.replace(/\s*\n\s*(\*|\/\/|--)?\s*/g, ' '),
  }));
});

describe('citations of the project docs', () => {
  it('exist', () => {
    expect(citations.length).toBeGreaterThan(20);
  });

  it.each(citations.map((c) => [`${c.file} → ${c.doc} "${c.section}"`, c] as const))('%s names a real section', (_label, citation) => {
    expect([...headings(citation.doc)]).toContain(citation.section);
  });
});

/** `README "Section"`: the README is a front door, so a cited section must be one of its own headings. */
const readmeCitations = tracked
  .filter((file) => file !== 'test/docs/docs-citations.test.ts')
  .flatMap((file) =>
    [...fs.readFileSync(path.join(root, file), 'utf8').matchAll(/(?<![\w/.-])README(?:\.md)?[\s*/-]*"([^"]+)"/g)].map((m) => ({
      file,
      section: m[1]!.replace(/\s*\n\s*(\*|\/\/|--)?\s*/g, ' '),
    })),
  );

describe('citations of the README', () => {
  it('are found by the pattern (a self-check, on this sentence)', () => {
    expect([...'as README "Two commands" says'.matchAll(/(?<![\w/.-])README(?:\.md)?[\s*/-]*"([^"]+)"/g)]).toHaveLength(1);
  });

  it.each(readmeCitations.map((c) => [`${c.file} → README "${c.section}"`, c] as const))('%s names a real section', (_label, citation) => {
    expect([...headings('README.md')]).toContain(citation.section);
  });
});

/** Every docs/….md path that code, tests, scripts and docs name, with or without a section. */
const docPaths = tracked.flatMap((file) =>
  [...fs.readFileSync(path.join(root, file), 'utf8').matchAll(/\bdocs\/([a-z0-9/-]+\.md)\b/g)].map((m) => ({ file, doc: `docs/${m[1]}` })),
);

describe('paths of the project docs', () => {
  it('are cited', () => {
    expect(docPaths.length).toBeGreaterThan(20);
  });

  it.each(docPaths.map((c) => [`${c.file} → ${c.doc}`, c] as const))('%s names a file that exists', (_label, citation) => {
    expect(fs.existsSync(path.join(root, citation.doc))).toBe(true);
  });
});

describe('references outside the repository', () => {
  // This test file names the patterns it looks for, so it is left out of its own search.
  const others = tracked.filter((file) => file !== 'test/docs/docs-citations.test.ts');

  it.each([
    ['a sibling shared/ folder', /\.\.\/shared|shared\/(spec|facts)/],
    ['the decisions document', /decisions §|decisions\.md/],
    ['the contract document', /service-api\.md/],
    ['the style guide', /style\.md habit/],
    ['a tracker issue or a work session', /\b(issue|session) #?\d+/i],
  ])('none cites %s', (_label, pattern) => {
    expect(others.filter((file) => pattern.test(fs.readFileSync(path.join(root, file), 'utf8')))).toEqual([]);
  });
});
