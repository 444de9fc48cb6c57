import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * CONTRIBUTING.md and the AGENTS.md files are a map of the code: every file, folder, npm script,
 * layer rule and test name they give must exist, so a rename that forgets them fails here
 * instead of sending the next engineer to a file that is gone.
 */
const root = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

const agentsFiles = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*AGENTS.md'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((file) => file !== '' && fs.existsSync(path.join(root, file)));
const maps = ['CONTRIBUTING.md', ...agentsFiles];

const topLevel = new Set(fs.readdirSync(root));
/** MCP methods look like paths (`tools/list`, `notifications/cancelled`) and are not. */
const MCP_METHOD =
  /^(tools|resources|prompts|tasks|notifications|elicitation|sampling|completion|logging|roots|subscriptions|server)\/(list|call|read|get|result|cancel|subscribe|unsubscribe|create|complete|cancelled|progress|message|list_changed|updated|setLevel|update|listen|discover|tasks)$/;
const FILE = /\.(ts|tsx|mjs|cjs|js|json|md|sql|png)$/;

/** Whether git ignores the path (a cache the map mentions is not in a fresh clone). */
function ignored(file: string): boolean {
  try {
    execFileSync('git', ['check-ignore', '-q', '--', file], { cwd: root });
    return true;
  } catch {
    return false;
  }
}

/**
 * The paths a map names: words that end like a file, or start with a folder of the repository
 * or of the map's own folder; a word with a placeholder (`<name>`, `*`, `NNNN`) is a pattern.
 */
function namedPaths(map: string, mapText = read(map)): string[] {
  const folder = path.dirname(map);
  const local = new Set(folder === '.' ? [] : fs.readdirSync(path.join(root, folder)));
  const text = mapText.replace(/\[([^\]]*)\]\(([^)#\s]+)[^)]*\)/g, ' $1 $2 ');
  const words = text.split(/[\s`"'(),;]+/).map((word) => word.replace(/^\*+|[*.:]+$/g, ''));
  return [
    ...new Set(
      words.filter((word) => {
        if (word === '' || /^[/@-]|:\/\/|[<>{}*…]|NNNN/.test(word) || MCP_METHOD.test(word)) return false;
        const first = word.split('/')[0]!;
        // A word that starts with a dot is a file of the repository (`.ci/run`) or an extension (`.tsx`).
        if (word.startsWith('.') && !topLevel.has(first) && !local.has(first)) return false;
        return FILE.test(word) || (word.includes('/') && (topLevel.has(first) || local.has(first)));
      }),
    ),
  ];
}

function resolves(map: string, file: string): boolean {
  return [root, path.join(root, path.dirname(map))].some((dir) => fs.existsSync(path.join(dir, file))) || ignored(file);
}

const scripts = Object.keys((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts);
const cruiserRules = new Set([...read('.dependency-cruiser.cjs').matchAll(/name: '([a-z0-9-]+)'/g)].map((m) => m[1]!));

/** Rule names a map gives: after the word "rule(s)", and in the last column of a table headed "rule". */
function namedRules(text: string): string[] {
  const names: string[] = [];
  for (const m of text.matchAll(/\brules? ((?:`[a-z0-9-]+`(?:,\s*|\s+and\s+)?)+)/g)) names.push(...[...m[1]!.matchAll(/`([a-z0-9-]+)`/g)].map((n) => n[1]!));
  let inRuleTable = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith('|')) inRuleTable = false;
    else if (/\| rule \|$/.test(line)) inRuleTable = true;
    else if (inRuleTable) names.push(...[...(line.split('|').at(-2) ?? '').matchAll(/`([a-z0-9-]+)`/g)].map((n) => n[1]!));
  }
  return names;
}

/** `test/x.test.ts` ("a test name", "another"): the quoted names, which the file must hold. */
function namedTests(text: string): { file: string; name: string }[] {
  const found: { file: string; name: string }[] = [];
  for (const m of text.matchAll(/`(test\/[\w./-]+\.test\.ts)` \(([^)]*)\)/g)) {
    for (const q of m[2]!.matchAll(/"([^"]+)"/g)) found.push({ file: m[1]!, name: q[1]!.replace(/\s+/g, ' ') });
  }
  return found;
}

describe('the contributor map', () => {
  it('is CONTRIBUTING.md, the root AGENTS.md and one AGENTS.md per src/ folder that has one', () => {
    expect(maps).toContain('AGENTS.md');
    expect(agentsFiles.filter((file) => file.startsWith('src/')).length).toBeGreaterThanOrEqual(7);
  });

  it('is reachable from the root AGENTS.md: it links CONTRIBUTING.md and names every folder with its own AGENTS.md', () => {
    const agents = read('AGENTS.md');
    expect(agents).toContain('](CONTRIBUTING.md)');
    for (const file of agentsFiles.filter((f) => f !== 'AGENTS.md')) expect(agents, file).toContain(`\`${path.dirname(file)}/\``);
  });
});

describe.each(maps)('%s', (map) => {
  const text = read(map);

  it('names only files and folders that exist', () => {
    const paths = namedPaths(map);
    expect(paths.length).toBeGreaterThan(0);
    expect(paths.filter((file) => !resolves(map, file))).toEqual([]);
  });

  it('names only npm scripts that package.json has', () => {
    const named = [...text.matchAll(/npm run ([\w:-]+)/g)].map((m) => m[1]!);
    expect(named.filter((name) => !scripts.includes(name))).toEqual([]);
  });

  it('names only layer rules that .dependency-cruiser.cjs has', () => {
    expect(namedRules(text).filter((name) => !cruiserRules.has(name))).toEqual([]);
  });

  it('quotes only test names that the test file holds', () => {
    const missing = namedTests(text).filter(({ file, name }) => !fs.existsSync(path.join(root, file)) || !read(file).includes(name));
    expect(missing).toEqual([]);
  });
});

describe('the map check itself', () => {
  it('finds the paths, rules and test names of a map, and leaves patterns and routes alone', () => {
    const sample = [
      'Edit `src/domain/<resource>.ts` and `test/service/registry.test.ts` ("MCP fixed tools", "REST routes"),',
      'then `POST /v1/actions/{actionId}/cancel` and **`.tsx`** files, `test/console-*.test.ts`, `src/console/…`, `tools/list`;',
      'see [the guide](CONTRIBUTING.md#commits) and rule `no-circular`.',
      '| folder | rule |',
      '| `src/store` | `store-imports-no-layer`, `made-up-rule` |',
    ].join('\n');
    expect(namedRules(sample)).toEqual(['no-circular', 'store-imports-no-layer', 'made-up-rule']);
    expect(namedTests(sample)).toEqual([
      { file: 'test/service/registry.test.ts', name: 'MCP fixed tools' },
      { file: 'test/service/registry.test.ts', name: 'REST routes' },
    ]);
    expect(namedPaths('AGENTS.md', sample).sort()).toEqual(['CONTRIBUTING.md', 'src/store', 'test/service/registry.test.ts']);
  });
});
