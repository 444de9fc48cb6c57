import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configSchema } from '../src/config.js';
import { errorCodes } from '../src/domain/errors.js';
import { httpStatus } from '../src/http/errors.js';

/** The README's tables are the operator's reference: they must not drift from the code. */
const readme = fs.readFileSync(path.resolve(import.meta.dirname, '..', 'README.md'), 'utf8');

function section(heading: string): string {
  const start = readme.indexOf(`\n## ${heading}\n`);
  expect(start, `README has a "## ${heading}" section`).toBeGreaterThanOrEqual(0);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end === -1 ? undefined : end);
}

describe('README', () => {
  it.each(Object.keys(configSchema.shape))('documents the configuration variable %s', (variable) => {
    expect(section('Configuration')).toContain(`| \`${variable}\` |`);
  });

  it.each(errorCodes.map((code) => [code, httpStatus[code]] as const))('documents error code %s with status %i', (code, status) => {
    expect(section('Errors')).toMatch(new RegExp(`\\| \`${code}\` \\| ${status} \\|`));
  });

  it.each(['MCP', 'Actions and grants', 'Wake channel'])('keeps a "## %s" section', (heading) => {
    section(heading);
  });

  it('shows in "Build a device" the thermostat that test/device-package.test.ts runs, as it is', () => {
    const example = fs.readFileSync(path.resolve(import.meta.dirname, '..', 'packages/device-sdk/examples/thermostat.mjs'), 'utf8');
    const blocks = [...section('Build a device').matchAll(/\n```js\n([\s\S]*?)```\n/g)].map((m) => m[1]);
    expect(blocks).toEqual([example]);
  });
});
