import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { cruise, type IConfiguration, type ICruiseResult } from 'dependency-cruiser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The layer rules of .dependency-cruiser.cjs (`npm run lint:layers`) must fail on a forbidden import,
 * not just pass on the tree as it is. They run here on a miniature src/ in a temp directory, so the
 * real tree is never touched.
 */
const config = createRequire(import.meta.url)('../../.dependency-cruiser.cjs') as IConfiguration;

const allowed: Record<string, string> = {
  'src/store/driver.ts': 'export type Db = { path: string };\n',
  'src/domain/grants.ts': "import type { Db } from '../store/driver.js';\nexport const grants = (db: Db) => db.path;\n",
  'src/http/errors.ts': "import { grants } from '../domain/grants.js';\nexport const errors = grants;\n",
  'src/mcp/errors.ts': 'export const mcpErrors = 1;\n',
  'src/rest/app.ts': "import { errors } from '../http/errors.js';\nimport type { Db } from '../store/driver.js';\nexport const app = (db: Db) => errors(db);\n",
  'packages/device-sdk/src/device.ts': "import { WebSocket } from 'ws';\nexport const socket = (url: string) => new WebSocket(url);\n",
  'src/cli/device.ts': "import { socket } from '../../packages/device-sdk/src/device.js';\nexport const open = socket;\n",
};

let root: string;

beforeAll(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'));
});

afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

/** Writes the miniature tree plus `planted` (path → extra first line) into a fresh folder and cruises it. */
async function violations(planted: Record<string, string> = {}): Promise<string[]> {
  const dir = fs.mkdtempSync(path.join(root, 'tree-'));
  // The real packages, so rules about which npm packages a layer may use can resolve them.
  fs.symlinkSync(path.resolve(import.meta.dirname, '../..', 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  for (const [file, text] of Object.entries(allowed)) {
    fs.mkdirSync(path.join(dir, path.dirname(file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), (planted[file] ? `${planted[file]}\n` : '') + text);
  }
  for (const [file, text] of Object.entries(planted)) {
    if (file in allowed) continue;
    fs.mkdirSync(path.join(dir, path.dirname(file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), `${text}\n`);
  }
  const { tsConfig: _tsConfig, ...options } = config.options ?? {};
  const { output } = await cruise(['src', 'packages'], { ...options, baseDir: dir, validate: true, ruleSet: { forbidden: config.forbidden ?? [] } });
  return (output as ICruiseResult).summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
}

describe('layer rules', () => {
  it('pass a tree whose imports go down the layers', async () => {
    expect(await violations()).toEqual([]);
  });

  it('fail domain importing a surface', async () => {
    expect(await violations({ 'src/domain/grants.ts': "import '../rest/app.js';" })).toContain(
      'domain-imports-only-store: src/domain/grants.ts → src/rest/app.ts',
    );
  });

  it('fail one surface importing another', async () => {
    expect(await violations({ 'src/rest/app.ts': "import '../mcp/errors.js';" })).toEqual([
      'surface-imports-no-other-surface: src/rest/app.ts → src/mcp/errors.ts',
    ]);
  });

  it('fail the store importing domain, and a surface using the Db module for more than its type', async () => {
    expect(
      await violations({
        'src/store/driver.ts': "import '../domain/grants.js';",
        'src/rest/app.ts': "import '../store/driver.js';",
      }),
    ).toEqual(
      expect.arrayContaining([
        'store-imports-no-layer: src/store/driver.ts → src/domain/grants.ts',
        'db-type-only-above-domain: src/rest/app.ts → src/store/driver.ts',
      ]),
    );
  });

  it('fail the lower layers using a transport package: domain on hono, the device SDK on the database driver', async () => {
    expect(
      await violations({
        'src/domain/grants.ts': "import 'hono';",
        'packages/device-sdk/src/device.ts': "import '@libsql/client';",
      }),
    ).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^npm-packages-per-layer: src\/domain\/grants.ts → .*node_modules\/hono\//),
        expect.stringMatching(/^npm-packages-of-the-device-sdk: packages\/device-sdk\/src\/device.ts → .*node_modules\/@libsql\/client\//),
      ]),
    );
  });

  it('fail the device SDK importing server code, and the server (but for the CLI) importing the SDK', async () => {
    expect(
      await violations({
        'packages/device-sdk/src/device.ts': "import '../../../src/domain/grants.js';",
        'src/rest/app.ts': "import '../../packages/device-sdk/src/device.js';",
      }),
    ).toEqual([
      'device-sdk-imports-no-server: packages/device-sdk/src/device.ts → src/domain/grants.ts',
      'server-imports-no-device-sdk: src/rest/app.ts → packages/device-sdk/src/device.ts',
    ]);
  });

  it('fail a file in a folder no rule names', async () => {
    expect(await violations({ 'src/admin/panel.ts': "import '../rest/app.js';" })).toContain('no-unknown-layer: src/admin/panel.ts → src/rest/app.ts');
  });
});
