/**
 * `npm run docs:generate`: writes the parts of docs/ whose source is the code, between their
 * `<!-- generated:<name>:start -->` and `<!-- generated:<name>:end -->` markers. The text
 * around the markers is written by hand; test/docs/docs-generated.test.ts fails when a generated
 * part differs from what this script would write.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { configSchema } from '../src/config.js';
import { ACTION_STATES, ACTION_STATUSES, CANCEL_REASONS, EXPIRED_REASONS, INITIAL_STATUSES, MARKS, TRANSITIONS } from '../src/domain/action-states.js';
import { errorCodes } from '../src/domain/errors.js';
import { EVENT_TYPES } from '../src/domain/event-catalogue.js';
import { errorMeanings, httpStatus } from '../src/http/errors.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface GeneratedPart {
  /** The page, relative to the repository root. */
  file: string;
  /** The marker name: the part sits between `<!-- generated:<name>:start -->` and `…:end -->`. */
  name: string;
  render: () => string;
}

const code = (list: readonly string[]) => list.map((s) => `\`${s}\``).join(', ');

/** A schema default as an operator would type it (`true`, `268435456`), or — for none. */
function shownDefault(field: z.ZodType): string {
  if (!(field instanceof z.ZodDefault)) return '—';
  const value: unknown = field.def.defaultValue;
  return `\`${String(value)}\``;
}

export function configurationTable(): string {
  const rows = Object.entries(configSchema.shape).map(([name, field]) => {
    const meaning = field.description;
    if (!meaning) throw new Error(`src/config.ts: ${name} has no .describe() text`);
    return `| \`${name}\` | ${shownDefault(field)} | ${meaning} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}

export function errorTable(): string {
  const rows = errorCodes.map((c) => `| \`${c}\` | ${httpStatus[c]} | ${errorMeanings[c]} |`);
  return ['| `error.code` | HTTP | When |', '|---|---|---|', ...rows].join('\n');
}

export function actionTransitions(): string {
  const transitions = Object.entries(TRANSITIONS);
  const marks = Object.entries(MARKS);
  return [
    `A new action is ${INITIAL_STATUSES.map((s) => `\`${s}\``).join(' or ')}. Final, no move leaves them: ${code(ACTION_STATUSES.filter((s) => ACTION_STATES[s].terminal))}.`,
    '',
    '| Move | From | To | Made by |',
    '|---|---|---|---|',
    ...transitions.map(([name, t]) => `| \`${name}\` | ${code(t.from)} | ${code(t.to)} | ${t.by} |`),
    '',
    'Marks record news without moving the action, each at most once:',
    '',
    '| Mark | In | Records | Made when |',
    '|---|---|---|---|',
    ...marks.map(([name, m]) => `| \`${name}\` | ${code(m.on)} | ${m.records} | ${m.by} |`),
  ].join('\n');
}

export function actionReasons(): string {
  return [
    '| `cancelReason` | Meaning |',
    '|---|---|',
    ...Object.entries(CANCEL_REASONS).map(([reason, meaning]) => `| \`${reason}\` | ${meaning} |`),
    '',
    '| `expiredReason` | Meaning |',
    '|---|---|',
    ...Object.entries(EXPIRED_REASONS).map(([reason, meaning]) => `| \`${reason}\` | ${meaning} |`),
  ].join('\n');
}

export function eventTypes(): string {
  return ['| Event | Meaning |', '|---|---|', ...Object.entries(EVENT_TYPES).map(([type, meaning]) => `| \`${type}\` | ${meaning} |`)].join('\n');
}

export const parts: readonly GeneratedPart[] = [
  { file: 'docs/operators/configuration.md', name: 'configuration', render: configurationTable },
  { file: 'docs/reference/errors.md', name: 'errors', render: errorTable },
  { file: 'docs/reference/action-states.md', name: 'action-transitions', render: actionTransitions },
  { file: 'docs/reference/action-states.md', name: 'action-reasons', render: actionReasons },
  { file: 'docs/reference/events.md', name: 'event-types', render: eventTypes },
];

/** The page's text with the part replaced by what the code says now. */
export function withPart(text: string, part: GeneratedPart): string {
  const start = `<!-- generated:${part.name}:start -->`;
  const end = `<!-- generated:${part.name}:end -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from === -1 || to < from) throw new Error(`${part.file} has no ${start} … ${end} markers`);
  return `${text.slice(0, from + start.length)}\n${part.render()}\n${text.slice(to)}`;
}

/** Every generated page as it should read, by file. */
export function generatedPages(): Map<string, string> {
  const pages = new Map<string, string>();
  for (const part of parts) {
    const text = pages.get(part.file) ?? fs.readFileSync(path.join(root, part.file), 'utf8');
    pages.set(part.file, withPart(text, part));
  }
  return pages;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const [file, text] of generatedPages()) {
    const target = path.join(root, file);
    if (fs.readFileSync(target, 'utf8') === text) continue;
    fs.writeFileSync(target, text);
    console.log(`docs:generate: wrote ${file}`);
  }
}
