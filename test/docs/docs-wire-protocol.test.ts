import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildOpenApi } from '../../src/rest/openapi.js';
import { routes } from '../../src/rest/routes.js';

/**
 * docs/devices/wire-protocol.md is what a maker writing C or MicroPython reads: every field name
 * its table of HTTP calls shows, in a request body or an answer, is checked against the OpenAPI
 * document the service serves (the same schemas that validate the wire), and so is whether the
 * page marks it optional (`?`). A renamed or added field cannot leave the page behind.
 */

type Schema = {
  $ref?: string;
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
};
/** A field shown on the page: optional or not, and the object it holds, if the page spells it out. */
interface Shown {
  optional: boolean;
  fields?: Map<string, Shown>;
  /** A component the page names as the value (`{ data: Action }`). */
  component?: string;
}

const root = path.resolve(import.meta.dirname, '../..');
const page = fs.readFileSync(path.join(root, 'docs/devices/wire-protocol.md'), 'utf8');
const document = buildOpenApi(routes, { version: 'test', serverUrl: 'http://localhost' }) as {
  paths: Record<
    string,
    Record<
      string,
      { requestBody?: { content: Record<string, { schema: Schema }> }; responses: Record<string, { content?: Record<string, { schema: Schema }> }> }
    >
  >;
  components: { schemas: Record<string, Schema> };
};

/** Reads `{ a, b?: { c }, d: [{ e }], f: Name | null, g: "x" | "y" }` into its fields. */
function parseObject(text: string): Map<string, Shown> {
  let at = 0;
  const skipSpace = () => {
    while (/\s/.test(text[at] ?? '')) at++;
  };
  const object = (): Map<string, Shown> => {
    expect(text[at], `an object at ${text.slice(at)}`).toBe('{');
    at++;
    const fields = new Map<string, Shown>();
    for (;;) {
      skipSpace();
      if (text[at] === '}') return (at++, fields);
      const name = /^[A-Za-z_]\w*/.exec(text.slice(at))?.[0];
      expect(name, `a field name at ${text.slice(at)}`).toBeDefined();
      at += name!.length;
      const shown: Shown = { optional: text[at] === '?' };
      if (shown.optional) at++;
      skipSpace();
      if (text[at] === ':') {
        at++;
        skipSpace();
        if (text[at] === '{') shown.fields = object();
        else if (text.startsWith('[{', at)) {
          at++;
          shown.fields = object();
          expect(text[at]).toBe(']');
          at++;
        } else {
          const value = /^[^,}]*/.exec(text.slice(at))![0];
          at += value.length;
          const component = /^([A-Z]\w*)\b/.exec(value.trim())?.[1];
          if (component) shown.component = component;
        }
        // `{ … } | null`: the rest of an alternative names no field.
        at += /^[^,}]*/.exec(text.slice(at))![0].length;
      }
      fields.set(name!, shown);
      skipSpace();
      if (text[at] === ',') at++;
    }
  };
  skipSpace();
  return object();
}

const resolve = (schema: Schema): Schema => {
  if (schema.$ref) return resolve(document.components.schemas[schema.$ref.split('/').pop()!]!);
  if (schema.anyOf) return resolve(schema.anyOf.find((s) => s.type !== 'null')!);
  if (schema.type === 'array' && schema.items) return resolve(schema.items);
  return schema;
};

/** Every field shown is in the schema, optional exactly when the schema does not require it, and every required one is shown. */
function expectMatches(where: string, shown: Map<string, Shown>, schema: Schema): void {
  const object = resolve(schema);
  const properties = object.properties ?? {};
  const required = new Set(object.required ?? []);
  for (const [name, field] of shown) {
    expect(Object.keys(properties), `${where}: the page shows "${name}"`).toContain(name);
    expect(field.optional, `${where}.${name}: the page's "?" against the schema's required`).toBe(!required.has(name));
    const property = properties[name]!;
    if (field.fields) expectMatches(`${where}.${name}`, field.fields, property);
    if (field.component) {
      const ref = property.$ref ?? property.anyOf?.find((s) => s.$ref)?.$ref;
      expect(ref, `${where}.${name} names the component`).toBe(`#/components/schemas/${field.component}`);
    }
  }
  for (const name of required) expect([...shown.keys()], `${where}: the page leaves out the required "${name}"`).toContain(name);
}

interface Row {
  method: string;
  path: string;
  body: string;
}

/** The rows of the table under "The HTTP calls" (a `\|` inside code is a literal bar). */
function callRows(): Row[] {
  const section = page.split('## The HTTP calls')[1]!.split('\n## ')[0]!;
  const rows: Row[] = [];
  for (const line of section.split('\n')) {
    if (!line.startsWith('| ') || line.startsWith('| Step') || line.startsWith('|---')) continue;
    const cells = line
      .slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((cell) => cell.trim().replace(/\\\|/g, '|'));
    const call = /`(GET|POST|PUT|PATCH|DELETE) ([^`]+)`/.exec(cells[1]!)!;
    // `{id}` is the calling device's id, whatever the route names its parameter.
    const shape = (route: string) => route.replace(/\{[^}]+\}/g, '{}');
    const path = Object.keys(document.paths).find((key) => shape(key) === shape(call[2]!)) ?? call[2]!.replace('{id}', '{deviceId}');
    rows.push({ method: call[1]!.toLowerCase(), path, body: cells[3]!.replace(/`/g, '') });
  }
  return rows;
}

describe('docs/devices/wire-protocol.md against the OpenAPI document', () => {
  const rows = callRows();

  it('shows every device call a device without an SDK makes', () => {
    expect(rows.map((row) => `${row.method} ${row.path}`)).toEqual([
      'post /v1/sdk/devices',
      'post /v1/device/{deviceId}/manifest',
      'post /v1/device/{deviceId}/next',
      'post /v1/device/{deviceId}/result',
      'post /v1/device/{reporterId}/state',
      'post /v1/device/{deviceId}/events-ticket',
    ]);
  });

  it.each(rows.map((row) => [`${row.method.toUpperCase()} ${row.path}`, row] as const))('%s: the body and the answer name the schema fields', (_name, row) => {
    const operation = document.paths[row.path]?.[row.method];
    expect(operation, `${row.path} is in the OpenAPI document`).toBeDefined();
    const [request, answer] = row.body.split('→').map((part) => part.trim());
    const requestSchema = operation!.requestBody?.content['application/json']?.schema;
    if (request!.startsWith('{')) {
      expect(requestSchema, 'the page shows a body').toBeDefined();
      expectMatches(`${row.path} body`, parseObject(request!), requestSchema!);
    } else {
      expect(request).toBe('no body');
      expect(requestSchema).toBeUndefined();
    }
    const [, status, shape] = /^(\d{3}) (\{.*)$/.exec(answer!)!;
    const answerSchema = operation!.responses[status!]?.content?.['application/json']?.schema;
    expect(answerSchema, `${row.path} answers ${status}`).toBeDefined();
    expectMatches(`${row.path} ${status}`, parseObject(shape!), answerSchema!);
  });

  it('names the wire field of a fetched command\'s arguments, "args"', () => {
    expect(page).toMatch(/A fetched\s+command carries `capability`, `args`/);
    expect(Object.keys(resolve(document.components.schemas.DeviceNext!).properties!)).toContain('args');
  });

  it('points at both device SDKs', () => {
    expect(page).toContain('(../../packages/device-sdk/README.md)');
    expect(page).toContain('(../../packages/device-sdk-python/README.md)');
  });
});
