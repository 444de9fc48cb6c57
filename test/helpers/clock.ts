import type { Clock } from '../../src/domain/context.js';

/**
 * A clock the test moves by hand, for expiry rules (setup tokens, enrollment codes) without
 * sleeping. It starts at the real time so owner JWTs, which jose checks against the real
 * clock, stay valid.
 */
export interface ManualClock extends Clock {
  set(ms: number): void;
  advance(ms: number): void;
}

export function manualClock(start = Date.now()): ManualClock {
  let current = start;
  return {
    now: () => current,
    set: (ms) => {
      current = ms;
    },
    advance: (ms) => {
      current += ms;
    },
  };
}
