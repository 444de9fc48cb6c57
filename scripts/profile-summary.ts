/**
 * Summarises a V8 .cpuprofile (from `npm run bench -- --profile`, i.e. `node --cpu-prof`):
 * self time by function and by package or source file, and inclusive time of this project's
 * own functions, so a profile can be read without a browser.
 *
 *   npx tsx scripts/profile-summary.ts profiles/CPU.….cpuprofile [--top 30]
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '30' } } });
const top = Number(values.top);
const profile = JSON.parse(fs.readFileSync(positionals[0]!, 'utf8')) as Profile;

const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);

function where(url: string): string {
  if (!url) return '(native)';
  const modules = url.lastIndexOf('node_modules/');
  if (modules >= 0) {
    const rest = url.slice(modules + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return url;
  const src = url.indexOf('/src/');
  return src >= 0 ? url.slice(src + 1) : url.replace(/^file:\/\//, '');
}

const label = (node: ProfileNode) => `${node.callFrame.functionName || '(anonymous)'} ${where(node.callFrame.url)}:${node.callFrame.lineNumber + 1}`;
const pct = (us: number) => `${((us / total) * 100).toFixed(1).padStart(5)} %`;

function table(title: string, entries: Map<string, number>) {
  console.log(`\n${title}`);
  for (const [name, us] of [...entries].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${name}`);
}

const selfByFunction = new Map<string, number>();
const selfByPlace = new Map<string, number>();
const inclusive = new Map<string, number>();
for (const [id, us] of self) {
  const node = byId.get(id)!;
  selfByFunction.set(label(node), (selfByFunction.get(label(node)) ?? 0) + us);
  const place = where(node.callFrame.url);
  selfByPlace.set(place, (selfByPlace.get(place) ?? 0) + us);
  // Inclusive time of the project's own frames, from src/ or its build in dist/ (counted once per sample stack).
  const seen = new Set<string>();
  for (let cursor: number | undefined = id; cursor !== undefined; cursor = parent.get(cursor)) {
    const frame = byId.get(cursor)!;
    if (!/\/(src|dist)\//.test(frame.callFrame.url)) continue;
    const name = label(frame);
    if (seen.has(name)) continue;
    seen.add(name);
    inclusive.set(name, (inclusive.get(name) ?? 0) + us);
  }
}

console.log(`${positionals[0]}: ${(total / 1e6).toFixed(2)} s sampled`);
table('Self time by package or file', selfByPlace);
table('Self time by function', selfByFunction);
table("Inclusive time of the service's functions (src/, or dist/ as the bench runs it)", inclusive);
