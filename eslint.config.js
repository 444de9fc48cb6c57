// ESLint for src/, test/ and scripts/ (`npm run lint:eslint`, part of `npm run lint`). The layer rules
// live in .dependency-cruiser.cjs; formatting is Prettier's (prettier.config.js), so nothing here is
// about layout.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** How a SQL statement starts, as a regular expression inside an esquery selector. */
const SQL_START = String.raw`^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|(CREATE|ALTER|DROP)\s+(TABLE|INDEX|TRIGGER|VIEW)\s|PRAGMA\s)`;

export default defineConfig(
  { ignores: ['**/dist/', 'data/', 'profiles/', 'coverage/', 'tools/', 'vendor/', '.cache/'] },
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },

  js.configs.recommended,
  tseslint.configs.recommended,

  {
    // Three type-aware rules, not the whole recommendedTypeChecked set: an unawaited or misused
    // promise is the bug an async service actually ships, while the no-unsafe-* family flags every
    // JSON body a test reads (~1,500 findings). On the service and the scripts, where such a
    // promise ships; not on test/, where they cost as much again (51 s of CPU for the whole tree
    // against 29 s for src/, scripts/ and packages/, `/usr/bin/time npx eslint …`) and where
    // vitest already reports an assertion left unawaited.
    files: ['src/**/*.{ts,tsx}', 'scripts/**/*.ts'],
    languageOptions: { parserOptions: { project: './tsconfig.lint.json', tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },

  {
    rules: {
      // `_name` is the project's mark for a value taken apart on purpose and not used
      // (`const { secret: _secret, ...rest } = row`, a callback's unused parameter).
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      // Already the habit everywhere: a type is imported with `import type`, so the layer check
      // (.dependency-cruiser.cjs) can tell "uses the Db type" from "uses the store".
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
    },
  },

  {
    // One job per file and per function (src/mcp/AGENTS.md shows the shape). Blank lines and
    // comments are not counted: the limits are about how much code one unit holds, and a rule
    // that counted comments would reward deleting the ones that say why. A unit that must stay
    // whole says why in its eslint-disable comment.
    files: ['src/**/*.{ts,tsx}'],
    rules: {
      'max-lines': ['error', { max: 400, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },

  {
    // Tests, scripts and the CLI read JSON answers as `any` and let the assertion (or the reader)
    // check the shape; typing each body would add nothing the expectation does not already say.
    files: ['test/**', 'scripts/**', 'src/cli/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // The two deliberate `any`s of the server, each explained where it stands: a registry of
    // operations of every credential kind (AnyOperation) and a map of handlers that each declare
    // their own argument type. Anywhere else in src/, `any` is an error.
    files: ['src/domain/operation.ts', 'packages/device-sdk/src/device.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },

  {
    // SQL lives only in src/store, parameterised, next to the migrations it depends on: a statement
    // written anywhere else in src/ is an error (test/tooling/eslint-rules.test.ts plants one). Matched on
    // how a statement starts, so an HTTP method named 'DELETE' or prose is not taken for SQL.
    files: ['src/**/*.{ts,tsx}'],
    ignores: ['src/store/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: `Literal[value=/${SQL_START}/]`, message: 'SQL belongs in src/store: call a store function instead.' },
        {
          selector: `TemplateLiteral > TemplateElement:first-child[value.raw=/${SQL_START}/]`,
          message: 'SQL belongs in src/store: call a store function instead.',
        },
      ],
    },
  },

  {
    // Configuration is parsed once, by src/config.ts from what the entry points hand it: only
    // src/main.ts and the CLI read the environment (test/tooling/eslint-rules.test.ts plants a read).
    files: ['src/**/*.{ts,tsx}'],
    ignores: ['src/main.ts', 'src/cli/**'],
    rules: {
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Only src/main.ts reads the environment: take a value of the parsed Config (src/config.ts).' },
      ],
    },
  },

  {
    // The config files themselves (this one, .dependency-cruiser.cjs) run on Node.
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    languageOptions: { globals: globals.node },
  },
);
