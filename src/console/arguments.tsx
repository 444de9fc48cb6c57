import { humanText, MAX_FIELD_CHARS } from '../domain/human-text.js';

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
export function ArgumentList(props: { args: Record<string, unknown> }) {
  const entries = Object.entries(props.args as Record<string, Json>);
  if (entries.length === 0) return <span class="muted">no arguments</span>;
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

/** What a function takes, read from its JSON Schema: each field, required or optional, what it accepts. */
export function ArgumentFields(props: { schema: Record<string, unknown> }) {
  const properties = (props.schema.properties ?? {}) as Record<string, FieldSchema>;
  const required = new Set(Array.isArray(props.schema.required) ? (props.schema.required as string[]) : []);
  const names = Object.keys(properties);
  if (names.length === 0) return <span class="muted">takes no arguments</span>;
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
