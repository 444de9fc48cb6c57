import { DatabaseLocked, type Db } from '../store/driver.js';
import { ping } from '../store/ping.js';

/**
 * A dependency a readiness probe asks (docs/operators/probes.md "Probes"): the database, Redis when
 * `REDIS_URL` is set. `check` resolves when the dependency answers and rejects (with a
 * message fit for an operator, no credentials) when it does not, within a bounded time.
 */
export interface DependencyCheck {
  name: 'database' | 'redis';
  check(): Promise<void>;
}

/** How long a probe waits for one dependency: well inside a load balancer's usual 5 s probe timeout. */
export const CHECK_TIMEOUT_MS = 2000;

/** The database answers a `SELECT 1`, and no other process holds its write lock (`ping`). */
export function databaseCheck(db: Db): DependencyCheck {
  return { name: 'database', check: () => ping(db) };
}

export interface DependencyState {
  name: DependencyCheck['name'];
  up: boolean;
  /** Why it is down, for the log: the dependency's own message (never sent to the caller). */
  reason?: string;
  /** Why it is down, for the caller: it does not answer, or it answers but another process holds its write lock. */
  problem?: 'not answering' | 'locked by another process';
}

/** Asks every dependency at once, each bounded by `timeoutMs`; never rejects. */
export async function checkDependencies(checks: readonly DependencyCheck[], timeoutMs = CHECK_TIMEOUT_MS): Promise<DependencyState[]> {
  return Promise.all(
    checks.map(async ({ name, check }): Promise<DependencyState> => {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      });
      try {
        await Promise.race([check(), timedOut]);
        return { name, up: true };
      } catch (error) {
        return {
          name,
          up: false,
          reason: error instanceof Error ? error.message : String(error),
          problem: error instanceof DatabaseLocked ? 'locked by another process' : 'not answering',
        };
      } finally {
        clearTimeout(timer);
      }
    }),
  );
}

const inFlight = new WeakMap<readonly DependencyCheck[], Promise<DependencyState[]>>();

/**
 * `checkDependencies` shared by every probe that arrives while a round is running: /readyz
 * is public and not rate limited, so a flood of probes while the database hangs would
 * otherwise hold one pending database request each (and open connections for them) on the dependency
 * that is already in trouble. No answer is reused once its round has ended.
 */
export function checkDependenciesShared(checks: readonly DependencyCheck[]): Promise<DependencyState[]> {
  let round = inFlight.get(checks);
  if (!round) {
    round = checkDependencies(checks).finally(() => inFlight.delete(checks));
    inFlight.set(checks, round);
  }
  return round;
}
