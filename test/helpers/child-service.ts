import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { SERVICE_MAIN } from './entry-point.js';
import { RELAXED_LIMITS, TEST_AUDIENCE, TEST_ISSUER } from './server.js';

/**
 * The service as its own process, the way `npm start` runs it: `dist/main.js` with
 * configuration in the environment. For tests that kill it (SIGKILL) or stop it (SIGTERM) and
 * look at what survives.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface Identity {
  env: Record<string, string>;
  ownerToken(subject: string): Promise<string>;
}

/** A JWKS file in `dir` for an identity provider the test holds the key of. */
export async function testIdentity(dir: string): Promise<Identity> {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const kid = `child-${path.basename(dir)}`;
  const jwksFile = path.join(dir, 'jwks.json');
  fs.writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }] }));
  return {
    env: { OWNER_JWKS_FILE: jwksFile, OWNER_ISSUER: TEST_ISSUER, OWNER_AUDIENCE: TEST_AUDIENCE, OWNER_WORKSPACE_CLAIM: 'workspace' },
    ownerToken: (subject) =>
      new SignJWT({ workspace: subject })
        .setProtectedHeader({ alg: 'ES256', kid })
        .setSubject(subject)
        .setIssuer(TEST_ISSUER)
        .setAudience(TEST_AUDIENCE)
        .setIssuedAt()
        .setExpirationTime('1h')
        .sign(privateKey),
  };
}

export interface ChildService {
  process: ChildProcess;
  url: string;
  port: number;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything the process wrote to stdout and stderr. */
  output(): string;
}

/**
 * Starts `dist/main.js` with `env` on top of the test defaults (loopback, relaxed limits, the
 * log at `info`, the level of the line it waits for) and resolves once it logs that it listens. Rejects if it exits first
 * (a port still taken, a bad configuration): the message carries its output.
 */
export function startChildService(env: Record<string, string>): Promise<ChildService> {
  const child = spawn(process.execPath, [SERVICE_MAIN], {
    cwd: ROOT,
    env: { ...process.env, HOST: '127.0.0.1', LOG_LEVEL: 'info', ...RELAXED_LIMITS, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      text += String(chunk);
      const line = text.split('\n').find((l) => l.includes('"msg":"listening"'));
      if (line) {
        child.stdout!.off('data', onData);
        child.stdout!.on('data', (more: Buffer) => (text += String(more)));
        const url = JSON.parse(line).url as string;
        resolve({ process: child, url, port: Number(new URL(url).port), exited, output: () => text });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (text += String(chunk)));
    void exited.then(({ code, signal }) => reject(new Error(`service exited (${code ?? signal}) before listening:\n${text.slice(-2000)}`)));
  });
}
