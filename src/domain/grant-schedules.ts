/**
 * The schedule maths of grant conditions (docs/owners/grants.md "Conditions"): weekly windows
 * read on the wall clock of an IANA time zone (`Intl`), across midnight and daylight-saving
 * changes, and their words. Pure; src/domain/grant-conditions.ts holds the rest of the rules.
 */

export const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Day = (typeof DAYS)[number];

const DAY_LABELS: Record<Day, string> = { mon: 'Mon', tue: 'Tue', wed: 'Wed', thu: 'Thu', fri: 'Fri', sat: 'Sat', sun: 'Sun' };

/** A schedule as the rules read it (the shape of `schedule` in src/domain/grant-conditions.ts). */
export interface Schedule {
  timeZone: string;
  windows: { days: Day[]; from: string; to: string }[];
}

interface LocalTime {
  year: number;
  month: number;
  day: number;
  /** 0 = Monday … 6 = Sunday. */
  weekday: number;
  minutes: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let found = formatters.get(timeZone);
  if (!found) {
    found = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      weekday: 'short',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
    });
    if (formatters.size > 500) formatters.clear();
    formatters.set(timeZone, found);
  }
  return found;
}

const WEEKDAYS: Record<string, number> = { Mon: 0, Tue: 1, Wed: 2, Thu: 3, Fri: 4, Sat: 5, Sun: 6 };

/** The wall-clock time in `timeZone` at the instant `at` (Unix ms). */
export function localTime(at: number, timeZone: string): LocalTime {
  const parts = Object.fromEntries(
    formatter(timeZone)
      .formatToParts(at)
      .map((p) => [p.type, p.value]),
  );
  return {
    year: Number(parts.year),
    month: Number(parts.month),
    day: Number(parts.day),
    weekday: WEEKDAYS[parts.weekday!]!,
    minutes: (Number(parts.hour) % 24) * 60 + Number(parts.minute),
  };
}

const minutesOf = (time: string) => Number(time.slice(0, 2)) * 60 + Number(time.slice(3, 5));

/** Whether the instant `at` falls inside one of the schedule's windows. */
export function insideSchedule(value: Schedule, at: number): boolean {
  const local = localTime(at, value.timeZone);
  const previous = (local.weekday + 6) % 7;
  return value.windows.some((window) => {
    const from = minutesOf(window.from);
    const to = minutesOf(window.to);
    const startsToday = window.days.includes(DAYS[local.weekday]!);
    if (from === to) return startsToday;
    if (from < to) return startsToday && local.minutes >= from && local.minutes < to;
    // Past midnight: the evening of a start day, or the early hours after one.
    return (startsToday && local.minutes >= from) || (window.days.includes(DAYS[previous]!) && local.minutes < to);
  });
}

/** The zone's offset from UTC at the instant `at`, in ms (local minus UTC). */
function offsetAt(at: number, timeZone: string): number {
  const local = localTime(at, timeZone);
  const asUtc = Date.UTC(local.year, local.month - 1, local.day, Math.floor(local.minutes / 60), local.minutes % 60);
  return asUtc - Math.floor(at / 60_000) * 60_000;
}

/**
 * The earliest instant whose wall-clock time in `timeZone` is the given one; for a time the
 * zone skips (a daylight-saving gap), the instant right after the gap that the old offset names.
 */
function instantOf(year: number, month: number, day: number, minutes: number, timeZone: string): number {
  const wall = Date.UTC(year, month - 1, day, Math.floor(minutes / 60), minutes % 60);
  const candidates = [offsetAt(wall - 86_400_000, timeZone), offsetAt(wall, timeZone), offsetAt(wall + 86_400_000, timeZone)].map((offset) => wall - offset);
  const exact = candidates.filter((at) => {
    const local = localTime(at, timeZone);
    return local.year === year && local.month === month && local.day === day && local.minutes === minutes;
  });
  if (exact.length > 0) return Math.min(...exact);
  return Math.max(...candidates);
}

/**
 * When the schedule next allows an action after `at` (Unix ms, a whole minute), or `at` itself
 * while inside a window; null for a schedule that never opens (it always does: 1 to 14 windows).
 */
export function nextWindowAt(value: Schedule, at: number): number | null {
  if (insideSchedule(value, at)) return at;
  const today = localTime(at, value.timeZone);
  let best: number | null = null;
  for (let offset = 0; offset <= 8; offset++) {
    const date = new Date(Date.UTC(today.year, today.month - 1, today.day + offset));
    const weekday = (today.weekday + offset) % 7;
    for (const window of value.windows) {
      if (!window.days.includes(DAYS[weekday]!)) continue;
      const from = window.from === window.to ? 0 : minutesOf(window.from);
      let start = instantOf(date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate(), from, value.timeZone);
      if (start <= at) continue;
      // A start moved past a daylight-saving gap: the window opened when the gap ended.
      for (let step = 0; step < 180 && start - 60_000 > at && insideSchedule(value, start - 60_000); step++) start -= 60_000;
      if (!insideSchedule(value, start)) continue;
      if (best === null || start < best) best = start;
    }
    if (best !== null && offset >= 1) break;
  }
  return best;
}

/** An instant as the schedule's zone shows it: "Mon 07:00". */
export function localWords(at: number, timeZone: string): string {
  const local = localTime(at, timeZone);
  const hh = String(Math.floor(local.minutes / 60)).padStart(2, '0');
  const mm = String(local.minutes % 60).padStart(2, '0');
  return `${DAY_LABELS[DAYS[local.weekday]!]} ${hh}:${mm}`;
}

/** An instant's wall-clock time in the zone, "14:03", with its day ("Tue 14:03") when it is a day or more after `now`. */
export function clockWords(at: number, timeZone: string, now: number): string {
  const words = localWords(at, timeZone);
  return at - now >= 86_400_000 ? words : words.slice(4);
}

function daysWords(days: readonly Day[]): string {
  const sorted = DAYS.filter((d) => days.includes(d));
  if (sorted.length === 7) return 'daily';
  const indexes = sorted.map((d) => DAYS.indexOf(d));
  const contiguous = indexes.every((value, i) => i === 0 || value === indexes[i - 1]! + 1);
  if (contiguous && sorted.length > 2) return `${DAY_LABELS[sorted[0]!]}–${DAY_LABELS[sorted[sorted.length - 1]!]}`;
  return sorted.map((d) => DAY_LABELS[d]).join(', ');
}

/** The schedule in words: "Mon–Fri 07:00–22:00 Europe/Berlin". */
export function scheduleWords(value: Schedule): string {
  const windows = value.windows.map((w) => `${daysWords(w.days)} ${w.from === w.to ? 'all day' : `${w.from}–${w.to}`}`);
  return `${windows.join('; ')} ${value.timeZone}`;
}

/** A budget's window in words: "an hour", "10 minutes", "a day". */
const UNITS = Object.entries({ day: 86_400, hour: 3600, minute: 60 }).map(([name, size]) => [size, name] as const);

export function periodWords(perSeconds: number): string {
  for (const [size, name] of UNITS) {
    if (perSeconds % size === 0) {
      const count = perSeconds / size;
      return count === 1 ? `${name === 'hour' ? 'an' : 'a'} ${name}` : `${count} ${name}s`;
    }
  }
  return `${perSeconds} seconds`;
}

/**
 * When the window open at `at` closes: the earliest instant after `at` outside every window
 * (overlapping windows run on), or null while `at` is outside the schedule.
 */
export function windowEndAt(value: Schedule, at: number): number | null {
  if (!insideSchedule(value, at)) return null;
  const today = localTime(at, value.timeZone);
  let best: number | null = null;
  for (let offset = -1; offset <= 8; offset++) {
    const date = new Date(Date.UTC(today.year, today.month - 1, today.day + offset));
    const weekday = (((today.weekday + offset) % 7) + 7) % 7;
    for (const window of value.windows) {
      if (!window.days.includes(DAYS[weekday]!)) continue;
      const from = minutesOf(window.from);
      const to = minutesOf(window.to);
      const endDay = to <= from ? 1 : 0;
      const end = new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate() + endDay));
      const at2 = instantOf(end.getUTCFullYear(), end.getUTCMonth() + 1, end.getUTCDate(), from === to ? 0 : to, value.timeZone);
      if (at2 > at && !insideSchedule(value, at2) && (best === null || at2 < best)) best = at2;
    }
  }
  return best;
}
