/**
 * A dependency a readiness probe asks (README "Probes"): the database, Redis when
 * `REDIS_URL` is set. `check` resolves when the dependency answers and rejects (with a
 * message fit for an operator, no credentials) when it does not, within a bounded time.
 */
export interface DependencyCheck {
  name: 'database' | 'redis';
  check(): Promise<void>;
}
