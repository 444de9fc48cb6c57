import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config.js';
import { errorCodes } from '../../src/domain/errors.js';
import { httpStatus } from '../../src/http/errors.js';

/** The README is the front door; the reference tables live in docs/ and must not drift from the code. */
const root = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');
const readme = read('README.md');

describe('the README, a front door', () => {
  it('fits on a few screens (250 lines at most)', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(250);
  });

  it('gives the two commands: run the service, and run the whole suite', () => {
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toContain('npm ci && npm run setup:test && npm test');
  });

  it.each(['/console', '/docs', '/mcp'])('says where %s is', (where) => {
    expect(readme).toContain(`http://127.0.0.1:8787${where}`);
  });

  it.each([
    'docs/README.md',
    'docs/getting-started.md',
    'docs/owners/console.md',
    'docs/agents/connecting.md',
    'packages/device-sdk/README.md',
    'docs/devices/wire-protocol.md',
    'docs/operators/configuration.md',
    'docs/reference/errors.md',
    'docs/contributors/architecture.md',
  ])('links into %s', (page) => {
    expect(readme).toContain(`](${page})`);
  });
});

describe('docs/operators/configuration.md', () => {
  const page = read('docs/operators/configuration.md');

  it.each(Object.keys(configSchema.shape))('documents the configuration variable %s', (variable) => {
    expect(page).toContain(`| \`${variable}\` |`);
  });
});

describe('docs/reference/errors.md', () => {
  const page = read('docs/reference/errors.md');

  it.each(errorCodes.map((code) => [code, httpStatus[code]] as const))('documents error code %s with status %i', (code, status) => {
    expect(page).toMatch(new RegExp(`\\| \`${code}\` \\| ${status} \\|`));
  });
});

describe('the pages that replaced the README sections', () => {
  it.each([
    ['docs/agents/mcp.md', 'MCP'],
    ['docs/agents/actions.md', 'Actions and grants'],
    ['docs/devices/wire-protocol.md', 'Wake channel'],
  ])('%s keeps a "%s" heading', (file, heading) => {
    expect(read(file)).toMatch(new RegExp(`^#{1,2} ${heading}$`, 'm'));
  });
});

describe('packages/device-sdk/README.md "Build a device"', () => {
  it('shows the thermostat that test/devices/device-package.test.ts runs, as it is', () => {
    const example = read('packages/device-sdk/examples/thermostat.mjs');
    const blocks = [...read('packages/device-sdk/README.md').matchAll(/\n```js\n([\s\S]*?)```\n/g)].map((m) => m[1]);
    expect(blocks).toEqual([example]);
  });
});
