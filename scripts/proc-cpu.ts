import fs from 'node:fs';

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/**
 * The CPU time (ms, user and system) in a /proc stat file: `/proc/<pid>/stat` for a process,
 * `/proc/self/task/<tid>/stat` for one thread. Undefined where /proc is not (not Linux).
 */
export function procCpuMs(statPath: string): number | undefined {
  try {
    // utime and stime are fields 14 and 15, the 12th and 13th after the command's closing parenthesis.
    const stat = fs.readFileSync(statPath, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}
