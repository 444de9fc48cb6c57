// `npm start`: builds only when an input of the build changed since the last start, then runs
// dist/main.js in this process (so SIGTERM and SIGINT reach its graceful shutdown). Plain
// JavaScript: starting needs neither tsx nor a TypeScript step of its own.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { BuildFailed, buildIfChanged, root } from './build-if-changed.mjs';

try {
  buildIfChanged('npm start');
} catch (error) {
  if (!(error instanceof BuildFailed)) throw error;
  console.error(error.message);
  process.exit(error.status);
}
await import(pathToFileURL(path.join(root, 'dist', 'main.js')).href);
