// `npm run test:node24`, `test:node22`, `test:node20`: the suite on another Node line without
// touching the system Node. Node 24 runs every file, 22 and 20 the files scripts/node-lines.mjs
// names for them; test files given on the command line run instead. The binary's folder goes
// first on PATH, so what the tests spawn (`process.execPath`, `npm`, `node`) runs on that line too.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NODE_BINARIES, NODE_LINE_FILES } from './node-lines.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [line, ...args] = process.argv.slice(2);
if (!(line in NODE_BINARIES)) {
  console.error(`test-node: a Node line to run on, one of ${Object.keys(NODE_BINARIES).join(', ')}; got ${line}`);
  process.exit(2);
}
const node = path.join(root, NODE_BINARIES[line]);
if (!fs.existsSync(node)) {
  console.error(`test:node${line}: ${path.relative(root, node)} is missing: run \`npm run setup:test\` first.`);
  process.exit(1);
}
const filesGiven = args.some((arg) => !arg.startsWith('-'));
const files = filesGiven ? [] : (NODE_LINE_FILES[line] ?? []);
const child = spawn(node, [path.join(root, 'node_modules/vitest/vitest.mjs'), 'run', ...files, ...args], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH ?? ''}` },
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
