/**
 * The owner's time zone on console forms (docs/owners/activity-log.md): the page's script puts
 * the browser's IANA zone in a hidden `tz` field, so a date or time the owner types means their
 * own clock; without script the field is empty and the console says it reads UTC.
 */

/** The zone a form named, if the runtime knows it; UTC otherwise. */
export function zoneOf(tz: string | undefined): string {
  if (!tz || tz.length > 64) return 'UTC';
  try {
    return new Intl.DateTimeFormat('en', { timeZone: tz }).resolvedOptions().timeZone;
  } catch {
    return 'UTC';
  }
}

/** How far `zone`'s wall clock is ahead of UTC at the instant `ms`. */
function offsetAt(ms: number, zone: string): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  }).formatToParts(new Date(ms));
  const part = (type: string) => Number(parts.find((p) => p.type === type)?.value);
  return Date.UTC(part('year'), part('month') - 1, part('day'), part('hour'), part('minute'), part('second')) - Math.floor(ms / 1000) * 1000;
}

/**
 * A wall-clock date (`YYYY-MM-DD`) or date and time (`YYYY-MM-DDTHH:MM`) in `zone`, as Unix ms;
 * undefined when it is not one. Read twice so that a date on the other side of a daylight-saving
 * change from its first guess still lands on the right hour.
 */
export function zonedMs(local: string | undefined, zone: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}))?$/.exec(local ?? '');
  if (!m) return undefined;
  const wall = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4] ?? 0), Number(m[5] ?? 0));
  if (!Number.isFinite(wall)) return undefined;
  const first = wall - offsetAt(wall, zone);
  return wall - offsetAt(first, zone);
}
