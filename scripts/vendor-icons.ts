/**
 * The console's icons are Lucide's (lucide-static, ISC), committed under vendor/lucide-icons/:
 * only the icons source.json lists, each SVG as published, with the licence. The service serves
 * them itself (src/console/icons.ts), so the production install gains no package and the
 * console loads nothing from another origin.
 *
 *   npm run vendor:icons -- --check     the committed files are byte for byte the published ones
 *   npm run vendor:icons                copy the listed icons again (after editing source.json)
 *   npm run vendor:icons -- 1.63.0      the same from that published version
 *
 * The package is fetched with `npm pack` (the registry's own integrity check applies) into a
 * temp folder; nothing is installed.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface Source {
  package: string;
  version: string;
  license: string;
  icons: string[];
}

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../vendor/lucide-icons');
const sourceFile = path.join(dir, 'source.json');
const source = JSON.parse(fs.readFileSync(sourceFile, 'utf8')) as Source;
const check = process.argv.includes('--check');
const version = process.argv.slice(2).find((arg) => !arg.startsWith('--')) ?? source.version;

const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-icons-'));
try {
  const tarball = execFileSync('npm', ['pack', `${source.package}@${version}`, '--silent', '--pack-destination', temp], { encoding: 'utf8' }).trim();
  execFileSync('tar', ['-xzf', path.join(temp, tarball), '-C', temp, 'package/icons', 'package/LICENSE', 'package/package.json']);
  const published = (name: string) => fs.readFileSync(path.join(temp, 'package', 'icons', `${name}.svg`));
  if (check) {
    const differ = source.icons.filter((name) => !published(name).equals(fs.readFileSync(path.join(dir, `${name}.svg`))));
    console.log(`${source.package}@${version}: ${differ.length === 0 ? 'every vendored icon matches' : `DIFFERS: ${differ.join(', ')}`}`);
    process.exitCode = differ.length === 0 ? 0 : 1;
  } else {
    for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.svg'))) fs.rmSync(path.join(dir, file));
    for (const name of source.icons) fs.writeFileSync(path.join(dir, `${name}.svg`), published(name));
    fs.copyFileSync(path.join(temp, 'package', 'LICENSE'), path.join(dir, 'LICENSE'));
    const license = (JSON.parse(fs.readFileSync(path.join(temp, 'package', 'package.json'), 'utf8')) as { license: string }).license;
    fs.writeFileSync(sourceFile, `${JSON.stringify({ ...source, version, license }, null, 2)}\n`);
    console.log(`vendored ${source.icons.length} icons of ${source.package}@${version} (${license})`);
  }
} finally {
  fs.rmSync(temp, { recursive: true, force: true });
}
