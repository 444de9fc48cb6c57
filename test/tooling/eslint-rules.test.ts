import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, expect, it } from 'vitest';

/**
 * The project's own ESLint rules (eslint.config.js) run on planted code, so a rule that stops
 * matching fails here rather than letting what it forbids in. Only the rule under test is run,
 * with the config's own block for it; the type-aware rules need a real program and are left out.
 */
type ConfigBlock = Linter.Config & { files?: string[]; ignores?: string[] };
const configUrl = pathToFileURL(path.resolve(import.meta.dirname, '../..', 'eslint.config.js')).href;
const config = ((await import(configUrl)) as { default: ConfigBlock[] }).default;
const blockOf = (rule: string) => config.find((block) => block.rules && rule in block.rules)!;

/** The messages of one rule's block of the config for `code`, as if it were the file `filename`. */
function findings(rule: string, filename: string, code: string): string[] {
  const linter = new Linter({ configType: 'flat', cwd: path.resolve(import.meta.dirname, '../..') });
  const messages = linter.verify(code, [{ files: ['**/*.ts', '**/*.tsx'], languageOptions: { parser: tseslint.parser } }, blockOf(rule)], filename);
  return messages.map((m) => m.message);
}

const sqlFindings = (filename: string, code: string) => findings('no-restricted-syntax', filename, code);

describe('SQL lives only in src/store (eslint.config.js no-restricted-syntax)', () => {
  it.each([
    ['a statement in a string', "await db.all('SELECT id FROM grants WHERE workspace_id = ?', [id]);"],
    ['a statement in a template', 'await db.run(`UPDATE actions SET status = ? WHERE id = ${"?"}`);'],
    ['an insert', "const sql = 'INSERT INTO workspace_events (type) VALUES (?)';"],
    ['a delete on a new line', 'const sql = `\n  DELETE FROM grants WHERE id = ?`;'],
    ['a schema change', "await db.run('CREATE TABLE notes (id TEXT)');"],
  ])('refuses %s in src/domain', (_label, code) => {
    expect(sqlFindings('src/domain/planted.ts', code)).toEqual(['SQL belongs in src/store: call a store function instead.']);
  });

  it('refuses it in a surface too', () => {
    expect(sqlFindings('src/console/screens/planted.tsx', "const rows = 'SELECT 1';")).toHaveLength(1);
  });

  it('allows it in src/store', () => {
    expect(sqlFindings('src/store/planted.ts', "await db.all('SELECT id FROM grants WHERE workspace_id = ?', [id]);")).toEqual([]);
  });

  it('takes neither HTTP methods nor prose for SQL', () => {
    const code = ["if (method === 'DELETE') stop();", "const note = 'Update the grant, then select a device.';", "const s = 'SELECTED';"].join('\n');
    expect(sqlFindings('src/domain/planted.ts', code)).toEqual([]);
  });
});

describe('only src/main.ts and the CLI read the environment (eslint.config.js no-restricted-properties)', () => {
  const read = 'const url = process.env.DATABASE_URL;';

  it.each(['src/domain/planted.ts', 'src/service.ts', 'src/mcp/planted.ts'])('refuses process.env in %s', (file) => {
    expect(findings('no-restricted-properties', file, read)).toEqual([expect.stringContaining('Only src/main.ts reads the environment')]);
  });

  it.each(['src/main.ts', 'src/cli/planted.ts'])('allows it in %s', (file) => {
    expect(findings('no-restricted-properties', file, read)).toEqual([]);
  });
});
