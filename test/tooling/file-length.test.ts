import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * A file of src/ over 400 lines is split where a clean seam exists (one concern per file), or
 * says on its first line why it is one file: `// Over 400 lines: <why>`, or the reason of an
 * `eslint-disable max-lines -- <why>` (ESLint's own rule counts code lines only).
 */
const root = path.resolve(import.meta.dirname, '../..');
const LIMIT = 400;
const REASON = /^(\/\/ Over 400 lines: |\/\* eslint-disable max-lines -- )\S.{20,}/;

const long = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'src'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((file) => /\.(ts|tsx)$/.test(file) && fs.existsSync(path.join(root, file)))
  .map((file) => ({ file, lines: fs.readFileSync(path.join(root, file), 'utf8').split('\n') }))
  .filter(({ lines }) => lines.length > LIMIT);

describe(`src/ files over ${LIMIT} lines`, () => {
  it('are few: split the rest', () => {
    expect(long.length).toBeLessThanOrEqual(3);
  });

  it.each(long.map(({ file, lines }) => [file, lines] as const))('%s gives its reason on its first line', (_file, lines) => {
    expect(lines[0]).toMatch(REASON);
  });

  it('recognises a reason line, and only one (a self-check)', () => {
    expect('// Over 400 lines: one schema of every setting, read side by side').toMatch(REASON);
    expect('/* eslint-disable max-lines -- the one schema of every setting */').toMatch(REASON);
    expect('// a long file').not.toMatch(REASON);
  });
});
