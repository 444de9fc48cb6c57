import { fromJsonSchema, type jsonSchemaValidator, type JsonSchemaType } from '@modelcontextprotocol/server';
import { z } from 'zod';

// ---------------------------------------------------------------------------------------
// Schemas as tools advertise them. Validation of every call happens once, in `invoke` (zod) and in the action
// request (the capability's JSON Schema via the domain's compiled-once Ajv), with the same
// schemas and the same `issues` REST answers. So the SDK is given schemas to advertise only:
// its default validator would compile each schema with Ajv on every request (the server is
// built per request), which for 1,000 functions costs far more than the request itself.
// ---------------------------------------------------------------------------------------

const advertiseOnly: jsonSchemaValidator = {
  getValidator: () => (input) => ({ valid: true, data: input as never, errorMessage: undefined }),
};

export function advertised(schema: Record<string, unknown>) {
  return fromJsonSchema(schema as JsonSchemaType, advertiseOnly);
}

/** JSON Schema of a zod schema, computed once per process (the zod schemas are constants). */
export function once<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= make());
}

export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return compact(rest) as Record<string, unknown>;
}

/**
 * Shapes the JSON Schema zod emits for the fixed tools so every MCP client can use it:
 * - drops what says nothing to a client: the UUID regex beside `format: "uuid"` and the ±2^53
 *   bounds of every integer (most of a large tools/list);
 * - writes a nullable `type: [T, "null"]` as `anyOf: [{ type: T, … }, { type: "null" }]` and a
 *   free-form `additionalProperties: {}` as `true`: both are legal JSON Schema, but clients
 *   that map tool schemas onto a single-`type` dialect (the MCP Inspector's schema
 *   portability check names Gemini's function declarations) refuse or mishandle them.
 */
function compact(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(compact);
  if (typeof node !== 'object' || node === null) return node;
  const source = node as Record<string, unknown>;
  if (Array.isArray(source.type) && source.type.length === 2 && source.type.includes('null')) {
    const { type, description, title, default: fallback, ...rest } = source;
    const nonNull = (type as string[]).find((t) => t !== 'null');
    return compact({
      ...(title !== undefined ? { title } : {}),
      ...(description !== undefined ? { description } : {}),
      ...(fallback !== undefined ? { default: fallback } : {}),
      anyOf: [{ type: nonNull, ...rest }, { type: 'null' }],
    });
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source)) {
    if (key === 'pattern' && source.format === 'uuid') continue;
    if ((key === 'minimum' || key === 'maximum') && Math.abs(value as number) === Number.MAX_SAFE_INTEGER) continue;
    if (key === 'additionalProperties' && typeof value === 'object' && value !== null && Object.keys(value).length === 0) {
      out[key] = true;
      continue;
    }
    out[key] = compact(value);
  }
  return out;
}
