import { humanText, MARKED, MAX_FIELD_CHARS } from '../domain/human-text.js';

/**
 * Arguments and argument schemas as an owner reads them: a definition list of names and
 * values, and a list of the fields a function takes with their type, bounds and description,
 * rather than raw JSON. Both come from agents or devices, so every value is text (hono/jsx
 * escapes it) and marked and capped as everywhere else (src/domain/human-text.ts).
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const shown = (text: string) => humanText(text, MAX_FIELD_CHARS);

function valueText(value: Json): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return value === '' ? '(empty text)' : value;
  if (typeof value === 'boolean') return value ? 'yes (true)' : 'no (false)';
  if (typeof value === 'number') return String(value);
  return JSON.stringify(value);
}

/** An action's arguments: one entry per field; nested values as compact JSON. */
export function ArgumentList(props: { args: Record<string, unknown>; empty?: string }) {
  const entries = Object.entries(props.args as Record<string, Json>);
  if (entries.length === 0) return <span class="muted">{props.empty ?? 'no arguments'}</span>;
  return (
    <dl class="args">
      {entries.map(([name, value]) => (
        <>
          <dt>{shown(name)}</dt>
          <dd>{shown(valueText(value))}</dd>
        </>
      ))}
    </dl>
  );
}

interface FieldSchema {
  type?: string | string[];
  description?: string;
  enum?: Json[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  default?: Json;
}

const TYPE_WORDS: Record<string, string> = {
  boolean: 'yes or no',
  integer: 'whole number',
  number: 'number',
  string: 'text',
  array: 'list',
  object: 'group of fields',
  null: 'nothing',
};

function describeField(field: FieldSchema): string {
  const types = Array.isArray(field.type) ? field.type : field.type ? [field.type] : [];
  const parts = [types.length > 0 ? types.map((t) => TYPE_WORDS[t] ?? t).join(' or ') : 'any value'];
  if (field.enum) parts.push(`one of ${field.enum.map((v) => valueText(v)).join(', ')}`);
  if (field.minimum !== undefined && field.maximum !== undefined) parts.push(`${field.minimum} to ${field.maximum}`);
  else if (field.minimum !== undefined) parts.push(`at least ${field.minimum}`);
  else if (field.maximum !== undefined) parts.push(`at most ${field.maximum}`);
  if (field.maxLength !== undefined) parts.push(`up to ${field.maxLength} characters`);
  if (field.default !== undefined) parts.push(`default ${valueText(field.default)}`);
  return parts.join(', ');
}

const isFields = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A read function's last-known value (the `result` object its device reported), as ArgumentList shows arguments. */
export function StateValue(props: { value: unknown }) {
  return isFields(props.value) ? <ArgumentList args={props.value} empty="no fields" /> : <span>{shown(valueText(props.value as Json))}</span>;
}

/** A last-known value on one line, for a list of devices: `name: value` pairs, nested values as compact JSON. */
export function stateSummary(value: unknown): string {
  if (!isFields(value)) return shown(valueText(value as Json));
  const entries = Object.entries(value as Record<string, Json>);
  if (entries.length === 0) return 'no fields';
  return shown(entries.map(([name, field]) => `${name}: ${valueText(field)}`).join(', '));
}

/** What a function takes, read from its JSON Schema: each field, required or optional, what it accepts. */
export function ArgumentFields(props: { schema: Record<string, unknown>; empty?: string }) {
  const properties = (props.schema.properties ?? {}) as Record<string, FieldSchema>;
  const required = new Set(Array.isArray(props.schema.required) ? (props.schema.required as string[]) : []);
  const names = Object.keys(properties);
  if (names.length === 0) return <span class="muted">{props.empty ?? 'takes no arguments'}</span>;
  return (
    <dl class="args">
      {names.map((name) => {
        const field = properties[name] ?? {};
        return (
          <>
            <dt>{shown(name)}</dt>
            <dd>
              {shown(describeField(field))}
              {required.has(name) ? ' · required' : ' · optional'}
              {typeof field.description === 'string' ? <div class="muted">{shown(field.description)}</div> : null}
            </dd>
          </>
        );
      })}
    </dl>
  );
}

/**
 * `shown` and `argumentList` for the console's scripts (src/console/assets.ts,
 * src/console/pending.tsx), which render rows arriving live as the server renders them above:
 * every value set as text, marked and capped with the same characters and cap.
 */
export const ARGUMENT_LIST_SCRIPT = `
  // What an agent or a device wrote, marked and capped as the server renders it
  // (src/domain/human-text.ts gives both the characters and the cap).
  var MARKED = new RegExp(${JSON.stringify(MARKED.source)}, 'u');
  function shown(text) {
    var chars = Array.from(text);
    var kept = chars.slice(0, ${MAX_FIELD_CHARS});
    var marked = kept.map(function (c) {
      return MARKED.test(c) ? '⟨U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '⟩' : c;
    }).join('');
    var rest = chars.length - kept.length;
    return rest > 0 ? marked + '… (' + rest + ' more character' + (rest === 1 ? '' : 's') + ')' : marked;
  }
  function valueText(value) {
    return value === null ? 'null' : typeof value === 'string' ? (value === '' ? '(empty text)' : value)
      : typeof value === 'boolean' ? (value ? 'yes (true)' : 'no (false)') : typeof value === 'number' ? String(value) : JSON.stringify(value);
  }
  function isFields(value) { return typeof value === 'object' && value !== null && !Array.isArray(value); }
  // A last-known value as StateValue renders it, and on one line as stateSummary writes it.
  function stateValue(value) {
    if (isFields(value)) return argumentList(value, 'no fields');
    var span = document.createElement('span');
    span.textContent = shown(valueText(value));
    return span;
  }
  function stateSummary(value) {
    if (!isFields(value)) return shown(valueText(value));
    var names = Object.keys(value);
    if (names.length === 0) return 'no fields';
    return shown(names.map(function (name) { return name + ': ' + valueText(value[name]); }).join(', '));
  }
  // An action's arguments as ArgumentList renders them: a definition list.
  function argumentList(args, empty) {
    var names = Object.keys(args);
    if (names.length === 0) {
      var none = document.createElement('span');
      none.className = 'muted';
      none.textContent = empty || 'no arguments';
      return none;
    }
    var list = document.createElement('dl');
    list.className = 'args';
    names.forEach(function (name) {
      var value = args[name];
      var dt = document.createElement('dt');
      dt.textContent = shown(name);
      var dd = document.createElement('dd');
      dd.textContent = shown(valueText(value));
      list.append(dt, dd);
    });
    return list;
  }
`;
