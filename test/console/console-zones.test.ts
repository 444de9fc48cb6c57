import { describe, expect, it } from 'vitest';
import { zonedMs, zoneOf } from '../../src/console/zones.js';

/**
 * The owner's time zone on console forms (docs/owners/activity-log.md): a date or time typed in
 * the activity filters or the export range means the owner's own clock, named by the browser.
 */

describe('a typed date and time in the owner’s zone', () => {
  it('is the instant that wall clock shows there', () => {
    expect(zonedMs('2026-11-27T09:30', 'Europe/Berlin')).toBe(Date.UTC(2026, 10, 27, 8, 30));
    expect(zonedMs('2026-07-01T09:30', 'Europe/Berlin')).toBe(Date.UTC(2026, 6, 1, 7, 30));
    expect(zonedMs('2026-11-27', 'Pacific/Kiritimati')).toBe(Date.UTC(2026, 10, 26, 10, 0));
    expect(zonedMs('2026-11-27', 'America/Los_Angeles')).toBe(Date.UTC(2026, 10, 27, 8, 0));
  });

  it('lands on the right hour on the day the clocks change', () => {
    // Berlin moves from +01:00 to +02:00 at 02:00 local on 29 March 2026.
    expect(zonedMs('2026-03-29T01:00', 'Europe/Berlin')).toBe(Date.UTC(2026, 2, 29, 0, 0));
    expect(zonedMs('2026-03-29T12:00', 'Europe/Berlin')).toBe(Date.UTC(2026, 2, 29, 10, 0));
  });

  it('is UTC without a zone, and refuses what is not a date', () => {
    expect(zoneOf('')).toBe('UTC');
    expect(zoneOf('Not/A_Zone')).toBe('UTC');
    expect(zoneOf('Asia/Tokyo')).toBe('Asia/Tokyo');
    expect(zonedMs('2026-11-27T09:30', 'UTC')).toBe(Date.UTC(2026, 10, 27, 9, 30));
    expect(zonedMs('yesterday', 'UTC')).toBeUndefined();
    expect(zonedMs(undefined, 'UTC')).toBeUndefined();
  });
});
