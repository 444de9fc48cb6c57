/**
 * The API reference script at /docs is Scalar's standalone bundle, committed under
 * vendor/scalar-api-reference/ with its licence and source.json (package, version, SHA-256).
 *
 *   npm run vendor:scalar -- --check     the committed file is byte for byte the published one
 *   npm run vendor:scalar -- 1.47.0      replace it with that published version
 *
 * Both fetch the package with `npm pack` (the registry's own integrity check applies) into a
 * temp folder; nothing is installed.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface Source {
  package: string;
  version: string;
  file: string;
  sha256: string;
  license: string;
}

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../vendor/scalar-api-reference');
const sourceFile = path.join(dir, 'source.json');
const bundleFile = path.join(dir, 'standalone.js');
const source = JSON.parse(fs.readFileSync(sourceFile, 'utf8')) as Source;
const check = process.argv.includes('--check');
const version = process.argv.slice(2).find((arg) => !arg.startsWith('--')) ?? source.version;

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-scalar-'));
try {
  const tarball = execFileSync('npm', ['pack', `${source.package}@${version}`, '--silent', '--pack-destination', temp], { encoding: 'utf8' }).trim();
  execFileSync('tar', ['-xzf', path.join(temp, tarball), '-C', temp, `package/${source.file}`, 'package/package.json']);
  const published = fs.readFileSync(path.join(temp, 'package', source.file));
  const license = (JSON.parse(fs.readFileSync(path.join(temp, 'package', 'package.json'), 'utf8')) as { license: string }).license;
  if (check) {
    const committed = fs.readFileSync(bundleFile);
    const ok = sha256(committed) === source.sha256 && sha256(published) === source.sha256;
    console.log(`${source.package}@${version} ${source.file}: ${ok ? 'matches' : 'DIFFERS from'} vendor/scalar-api-reference (sha256 ${source.sha256})`);
    process.exitCode = ok ? 0 : 1;
  } else {
    fs.writeFileSync(bundleFile, published);
    fs.writeFileSync(sourceFile, `${JSON.stringify({ ...source, version, sha256: sha256(published), license }, null, 2)}\n`);
    console.log(`vendored ${source.package}@${version} (${license}); check vendor/scalar-api-reference/LICENSE still applies`);
  }
} finally {
  fs.rmSync(temp, { recursive: true, force: true });
}
