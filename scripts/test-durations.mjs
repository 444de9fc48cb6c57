// `npm run test:durations -- <report.json>`: writes test/durations.json, the seconds each test
// file took in a run, from that run's vitest JSON report (`npm test -- --reporter=json
// --outputFile=<report.json>`, as .ci/run writes one for Node 24). The run's sequencer
// (test/helpers/longest-first.ts) starts the longest files first by it. Take the report of a
// whole run on Node 24; a file the report lacks keeps its old figure, and a file that no
// longer exists is dropped. The report may come from another clone (CI's): paths are read
// relative to the repository they were measured in.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const table = path.join(root, 'test/durations.json');
const [report] = process.argv.slice(2);
if (!report) {
  console.error('test-durations: the JSON report of a vitest run to read, e.g. npm run test:durations -- /tmp/node24.json');
  process.exit(2);
}

const { testResults } = JSON.parse(fs.readFileSync(report, 'utf8'));
const old = fs.existsSync(table) ? JSON.parse(fs.readFileSync(table, 'utf8')) : {};
/** A file's path relative to this repository, for a report made here or in another clone: the longest suffix of its path that is a file here. */
function nameOf(absolute) {
  const segments = path.relative(root, absolute).split(path.sep);
  for (let i = 0; i < segments.length; i++) {
    if (segments[i] === '..') continue;
    const candidate = segments.slice(i).join('/');
    if (fs.existsSync(path.join(root, candidate))) return candidate;
  }
  return undefined;
}
const measured = Object.fromEntries(
  testResults.flatMap((file) => {
    const name = nameOf(file.name);
    return name ? [[name, Math.round((file.endTime - file.startTime) / 100) / 10]] : [];
  }),
);
const merged = { ...old, ...measured };
const kept = Object.keys(merged)
  .filter((file) => fs.existsSync(path.join(root, file)))
  .sort();
fs.writeFileSync(table, `${JSON.stringify(Object.fromEntries(kept.map((file) => [file, merged[file]])), null, 2)}\n`);
console.log(`test-durations: ${kept.length} files in ${path.relative(root, table)}, ${Object.keys(measured).length} from ${report}`);
