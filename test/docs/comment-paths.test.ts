import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * Every repository path a comment names (`src/domain/grants.ts`, `test/helpers/server.ts`,
 * `docs/agents/state.md`) and every path a contributor document names exists, so a reader who
 * follows one finds the file: a moved or renamed file (or a `.ts` that is a `.tsx`) fails here.
 * Comments are read with TypeScript's own scanner, so strings and regular expressions are not
 * mistaken for them.
 */
const root = path.resolve(import.meta.dirname, '../..');
const tracked = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((file) => file !== '' && fs.existsSync(path.join(root, file)));

const sources = tracked.filter((file) => /^(src|scripts|test|packages\/[^/]+\/src)\/.+\.(ts|tsx|mts|mjs|js|cjs)$/.test(file));
const contributorDocs = tracked.filter((file) => /^(AGENTS|CONTRIBUTING)\.md$|^src\/[^/]+\/AGENTS\.md$|^docs\/contributors\/.+\.md$/.test(file));

/** A path to a file with an extension, from the repository's root or from the naming file's folder. */
const ROOTED = /(?<![\w./@:-])([A-Za-z_.][\w.-]*(?:\/[\w.-]+)+\.(?:ts|tsx|mts|mjs|js|cjs|md|json|sql|sh|yml|yaml|toml))\b/g;
/** A folder of the repository (`src/store/migrations`, `docs/decisions/`), not a glob (`test/hostile/fuzz-<n>.test.ts`). */
const FOLDER = /(?<![\w./@:-])((?:src|test|docs|scripts|packages)(?:\/[\w-]+)+)(?![\w*<.-]|\/[\w*<])/g;
/** A placeholder a guide uses for a file still to be written: `NNNN_name.sql`, `<area>/x.test.ts`. */
const placeholder = (named: string) => /NNNN|<|(^|\/)x\.[a-z.]+$/.test(named);

/** Tokens after which a `/` divides; anywhere else it opens a regular expression. */
const ENDS_AN_EXPRESSION = new Set([
  ts.SyntaxKind.Identifier,
  ts.SyntaxKind.NumericLiteral,
  ts.SyntaxKind.BigIntLiteral,
  ts.SyntaxKind.StringLiteral,
  ts.SyntaxKind.RegularExpressionLiteral,
  ts.SyntaxKind.NoSubstitutionTemplateLiteral,
  ts.SyntaxKind.TemplateTail,
  ts.SyntaxKind.CloseParenToken,
  ts.SyntaxKind.CloseBracketToken,
  ts.SyntaxKind.CloseBraceToken,
  ts.SyntaxKind.ThisKeyword,
  ts.SyntaxKind.SuperKeyword,
  ts.SyntaxKind.TrueKeyword,
  ts.SyntaxKind.FalseKeyword,
  ts.SyntaxKind.NullKeyword,
  ts.SyntaxKind.PlusPlusToken,
  ts.SyntaxKind.MinusMinusToken,
]);

/** The comments of a source file, in order. */
export function comments(file: string, text: string): string[] {
  const variant = file.endsWith('.tsx') ? ts.LanguageVariant.JSX : ts.LanguageVariant.Standard;
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, variant, text);
  const found: string[] = [];
  // One entry per open `{`: true when it is a template literal's `${`, whose `}` resumes the template.
  const braces: boolean[] = [];
  let previous = ts.SyntaxKind.Unknown;
  for (let token = scanner.scan(); token !== ts.SyntaxKind.EndOfFileToken; token = scanner.scan()) {
    if (token === ts.SyntaxKind.SingleLineCommentTrivia || token === ts.SyntaxKind.MultiLineCommentTrivia) {
      found.push(scanner.getTokenText());
      continue;
    }
    if (token === ts.SyntaxKind.WhitespaceTrivia || token === ts.SyntaxKind.NewLineTrivia) continue;
    if ((token === ts.SyntaxKind.SlashToken || token === ts.SyntaxKind.SlashEqualsToken) && !ENDS_AN_EXPRESSION.has(previous)) {
      token = scanner.reScanSlashToken();
    } else if (token === ts.SyntaxKind.TemplateHead) {
      braces.push(true);
    } else if (token === ts.SyntaxKind.OpenBraceToken) {
      braces.push(false);
    } else if (token === ts.SyntaxKind.CloseBraceToken && braces.pop() === true) {
      token = scanner.reScanTemplateToken(false);
      if (token === ts.SyntaxKind.TemplateMiddle) braces.push(true);
    }
    previous = token;
  }
  return found;
}

function named(text: string): string[] {
  return [...text.matchAll(ROOTED), ...text.matchAll(FOLDER)].map((m) => m[1]!).filter((p) => !placeholder(p));
}

const inComments = sources.flatMap((file) => {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  return comments(file, text).flatMap((comment) => named(comment).map((target) => ({ file, target })));
});

/** Root paths in a contributor document, and in a folder's AGENTS.md the file names it lists for its folder. */
const inDocs = contributorDocs.flatMap((file) => {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  const rooted = named(text).map((target) => ({ file, target }));
  if (!file.startsWith('src/')) return rooted;
  const folder = path.dirname(file);
  const local = [...text.matchAll(/`([\w.-]+(?:\/[\w.-]+)*\.(?:ts|tsx|sql|md))`/g)]
    .map((m) => m[1]!)
    .filter((name) => !placeholder(name) && named(name).length === 0)
    .map((name) => ({ file, target: `${folder}/${name}` }));
  return [...rooted, ...local];
});

/** Where a path named in `file` may point: from the root, or from the file's own folder. */
function resolves(file: string, target: string): boolean {
  return [path.join(root, target), path.join(root, path.dirname(file), target)].some((candidate) => fs.existsSync(candidate));
}

function why(file: string, target: string): string {
  return resolves(file, `${target}x`) ? `${target} is ${target}x` : `${target} is missing`;
}

describe('paths named in comments', () => {
  it('are found (a self-check: comments only, never strings or regular expressions)', () => {
    expect(inComments.length).toBeGreaterThan(300);
    const sample =
      "const a = '// src/nowhere.ts'; const r = /src\\/nowhere.ts/; // src/domain/grants.ts\nconst t = `${x}/*`; /* test/helpers/server.ts, in test/helpers */";
    expect(comments('sample.ts', sample).flatMap(named)).toEqual(['src/domain/grants.ts', 'test/helpers/server.ts', 'test/helpers']);
  });

  it.each(inComments.map((c) => [`${c.file} → ${c.target}`, c] as const))('%s exists', (_label, c) => {
    expect(resolves(c.file, c.target), why(c.file, c.target)).toBe(true);
  });
});

describe('paths named in contributor documents', () => {
  it('are found', () => {
    expect(inDocs.length).toBeGreaterThan(50);
  });

  it.each(inDocs.map((c) => [`${c.file} → ${c.target}`, c] as const))('%s exists', (_label, c) => {
    expect(resolves(c.file, c.target), why(c.file, c.target)).toBe(true);
  });
});
