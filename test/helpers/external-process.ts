import { spawn, type ChildProcess } from 'node:child_process';

/**
 * A server program the tests start themselves (sqld, redis-server): one process on a
 * loopback port, stopped with SIGKILL (as a crash would) and started again on the same port
 * and data, so a test can take a dependency away and give it back.
 */
export interface ExternalServer {
  port: number;
  /** Kills the process (SIGKILL) and waits until it is gone; its port then refuses connections. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data, and waits until it answers. */
  start(): Promise<void>;
  /** Everything it wrote, for a failing test's message. */
  output(): string;
}

export interface ExternalServerSpec {
  name: string;
  command: string;
  args: string[];
  port: number;
  /** Resolves true once the server answers on its port. */
  ready(): Promise<boolean>;
  /** How to install the program when it is missing, for the error message. */
  install: string;
}

const READY_TIMEOUT_MS = 15_000;

export async function startExternalServer(spec: ExternalServerSpec): Promise<ExternalServer> {
  let child: ChildProcess | undefined;
  let log = '';

  const start = async () => {
    const proc = spawn(spec.command, spec.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    proc.stdout?.on('data', (chunk: Buffer) => (log += chunk.toString()));
    proc.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
    const failed = new Promise<never>((_, reject) => {
      proc.once('error', (error: NodeJS.ErrnoException) =>
        reject(new Error(error.code === 'ENOENT' ? `${spec.name} is not installed (${spec.command}): ${spec.install}` : `${spec.name}: ${error.message}`)),
      );
      proc.once('exit', (code, signal) => reject(new Error(`${spec.name} exited (${code ?? signal}) before answering:\n${log}`)));
    });
    const deadline = Date.now() + READY_TIMEOUT_MS;
    const answered = (async () => {
      while (Date.now() < deadline) {
        if (await spec.ready().catch(() => false)) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`${spec.name} did not answer on port ${spec.port} within ${READY_TIMEOUT_MS} ms:\n${log}`);
    })();
    await Promise.race([answered, failed]);
    failed.catch(() => undefined);
  };

  const stop = async () => {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGKILL');
    await gone;
  };

  await start();
  return { port: spec.port, start, stop, output: () => log };
}
