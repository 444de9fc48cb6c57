import { z } from 'zod';
import { STORAGE_BUDGETS } from '../domain/capacity.js';
import type { CredentialKind } from '../domain/context.js';
import type { AnyOperation } from '../domain/operation.js';
import { pageFields } from '../domain/paging.js';
import { httpStatus } from '../http/errors.js';
import { namedSchemas } from './openapi-components.js';
import { extraPaths } from './openapi-extras.js';
import type { Route } from './routes.js';
import { EVENT_STREAM, NDJSON } from '../http/document-stream.js';

type JsonSchema = Record<string, unknown> & { properties?: Record<string, unknown>; required?: string[]; anyOf?: JsonSchema[] };

/** Security scheme per credential kind (docs/reference/rules.md "Credentials"). */
const securitySchemes: Record<CredentialKind, { scheme: string; description: string; bearerFormat?: string }> = {
  owner: {
    scheme: 'ownerSession',
    bearerFormat: 'JWT',
    description: 'Owner session: a JWT from the identity provider (or `npm run owner-token` in development).',
  },
  agent: { scheme: 'agentToken', description: 'Agent token (`dfc_agent_…`) or OAuth access token, each with a `read` or `act` ceiling.' },
  setup: { scheme: 'setupToken', description: 'Device setup token (`dfc_setup_…`): attaches devices, nothing else.' },
  device: { scheme: 'deviceToken', description: 'Device child credential (`dfc_device_…`).' },
};

const errorEnvelope = {
  type: 'object',
  required: ['error'],
  additionalProperties: false,
  properties: {
    error: {
      type: 'object',
      required: ['code'],
      properties: {
        code: { type: 'string', enum: Object.keys(httpStatus) },
        message: { type: 'string' },
        issues: {
          type: 'array',
          items: { type: 'object', required: ['path', 'message'], properties: { path: { type: 'string' }, message: { type: 'string' } } },
        },
        action: { type: 'object', description: 'For a refused approve or reject: the Action as it is now.' },
        details: {
          description:
            'For `quota_exceeded`: the storage budget used up, its limit, what is used, and Retry-After in seconds. For the grant conditions\' refusals (docs/owners/grants.md "Conditions"): `arguments_not_allowed` the allowed bounds per refused argument; `outside_schedule` when the next window opens and its zone; `grant_budget_exhausted` the budget, its use and when one more is allowed.',
          oneOf: [
            {
              type: 'object',
              title: 'quota_exceeded',
              required: ['budget', 'limit', 'used'],
              properties: {
                budget: { type: 'string', enum: [...STORAGE_BUDGETS] },
                limit: { type: 'integer' },
                used: { type: 'integer' },
                retryAfter: { type: 'integer' },
              },
            },
            {
              type: 'object',
              title: 'arguments_not_allowed',
              required: ['allowed'],
              properties: {
                allowed: { type: 'object', additionalProperties: { type: 'object' }, description: "The grant's bounds of each refused argument, by name." },
              },
            },
            {
              type: 'object',
              title: 'outside_schedule',
              required: ['nextWindowAt', 'timeZone'],
              properties: {
                nextWindowAt: { type: ['integer', 'null'], description: 'When the next window opens, Unix ms.' },
                timeZone: { type: 'string' },
              },
            },
            {
              type: 'object',
              title: 'grant_budget_exhausted',
              required: ['max', 'perSeconds', 'used', 'retryAt'],
              properties: {
                max: { type: 'integer' },
                perSeconds: { type: 'integer' },
                used: { type: 'integer' },
                retryAt: { type: 'integer', description: 'When one more action is allowed, Unix ms.' },
              },
            },
          ],
        },
        requestId: { type: 'string' },
      },
    },
  },
};

/** RFC 8288 `Link` to the next page of a list, absent on the last page. */
const linkHeader = {
  description: 'RFC 8288 link to the next page, `<…?cursor=…>; rel="next"`; absent on the last page.',
  schema: { type: 'string' },
};

const statusText: Record<number, string> = {
  400: 'Invalid request or validation failure; `issues` point at the fields.',
  401: 'Missing, unknown, expired or revoked credential.',
  403: 'A valid credential of another kind, or insufficient access or grant.',
  404: 'Resource not found (or not visible to this credential).',
  409: 'Conflict with the current state.',
  413: 'Request body over 16 KiB.',
  429: "Rate limit, workspace capacity limit, storage budget (`quota_exceeded`) or the grant's budget (`grant_budget_exhausted`); see Retry-After.",
  500: 'Internal error; quote the request id.',
  503: 'Device controls switched off, a required integration not configured, or a dependency (the database) not answering; see Retry-After.',
};

/**
 * zod writes a safe integer (`z.number().int()`, every timestamp) as an integer bounded by
 * ±(2^53 − 1); the reference shows those bounds as if they were limits or sample values.
 * They are the `int64` range a JSON number can hold exactly, so say that instead.
 */
function safeIntegerAsInt64({ jsonSchema: node }: { jsonSchema: Record<string, unknown> }): void {
  if (node.type !== 'integer') return;
  let unbounded = false;
  if (node.minimum === Number.MIN_SAFE_INTEGER) unbounded = delete node.minimum;
  if (node.maximum === Number.MAX_SAFE_INTEGER) unbounded = delete node.maximum;
  if (unbounded) node.format = 'int64';
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any', override: safeIntegerAsInt64 }) as JsonSchema;
  return rest;
}

/**
 * Replaces every subschema equal to a named model by a `$ref` to it, innermost first, so a
 * model that contains another (Device → Capability) matches once its parts are references.
 */
function referToNamed(node: unknown, named: Map<string, string>): unknown {
  if (Array.isArray(node)) return node.map((item) => referToNamed(item, named));
  if (node === null || typeof node !== 'object') return node;
  const inner = Object.fromEntries(Object.entries(node).map(([key, value]) => [key, referToNamed(value, named)]));
  const name = named.get(JSON.stringify(inner));
  return name ? { $ref: `#/components/schemas/${name}` } : inner;
}

/** `components.schemas` from the named models, and the lookup that turns their copies into `$ref`s. */
function componentSchemas(): { schemas: Record<string, JsonSchema>; named: Map<string, string> } {
  const named = new Map<string, string>();
  const schemas: Record<string, JsonSchema> = {};
  for (const { name, schema, example } of namedSchemas) {
    const own = referToNamed(jsonSchema(schema, 'output'), named) as JsonSchema;
    named.set(JSON.stringify(own), name);
    schemas[name] = { ...own, examples: [example] };
  }
  return { schemas, named };
}

/** Removes fields that travel in the path or headers from a body or query schema (every union branch too). */
function without(schema: JsonSchema, fields: string[]): JsonSchema {
  if (schema.anyOf) return { ...schema, anyOf: schema.anyOf.map((branch) => without(branch, fields)) };
  const properties = { ...(schema.properties ?? {}) };
  for (const field of fields) delete properties[field];
  const required = (schema.required ?? []).filter((name) => !fields.includes(name));
  return { ...schema, properties, ...(required.length > 0 ? { required } : { required: undefined }) };
}

function propertyOf(schema: JsonSchema, field: string): unknown {
  return schema.properties?.[field] ?? schema.anyOf?.map((b) => b.properties?.[field]).find(Boolean) ?? { type: 'string' };
}

/** One alternative per accepted credential kind, and OAuth where the operation accepts it on REST. */
function security(op: AnyOperation): Record<string, string[]>[] {
  const kinds = op.credentials as CredentialKind[];
  const alternatives = kinds.map((kind) => ({ [securitySchemes[kind].scheme]: [] as string[] }));
  if (op.oauth?.includes('rest')) alternatives.push({ oauth: ['read'] });
  return alternatives;
}

function operationObject(route: Route): Record<string, unknown> {
  const op: AnyOperation = route.operation;
  const input = jsonSchema(op.input, 'input');
  const output = jsonSchema(op.output, 'output');
  const pathFields = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
  const headerFields = Object.entries(route.headers ?? {});
  const queryFields = route.query ?? [];
  const rest = without(input, [...pathFields, ...headerFields.map(([, field]) => field), ...queryFields]);

  const parameters: Record<string, unknown>[] = [
    ...pathFields.map((name) => ({ name, in: 'path', required: true, schema: propertyOf(input, name) })),
    ...headerFields.map(([header, field]) => ({
      name: header,
      in: 'header',
      required: (input.required ?? []).includes(field),
      schema: propertyOf(input, field),
    })),
  ];
  for (const name of queryFields) {
    parameters.push({ name, in: 'query', required: (input.required ?? []).includes(name), schema: propertyOf(input, name) });
  }
  if (route.method === 'GET') {
    for (const [name, schema] of Object.entries(rest.properties ?? {})) {
      parameters.push({ name, in: 'query', required: (rest.required ?? []).includes(name), schema });
    }
  }
  // A list's paging fields are taken by invoke besides the operation's own input.
  if (op.paged) {
    for (const [name, schema] of Object.entries(jsonSchema(pageFields, 'input').properties ?? {}))
      parameters.push({ name, in: 'query', required: false, schema });
  }

  const publicRoute = op.credentials.includes('public');
  const statuses = [400, ...(publicRoute ? [] : [401, 403]), 404, ...(route.method === 'POST' ? [409, 413] : []), 429, 500, 503];
  const success = route.unwrapped ? output : { type: 'object', required: ['data'], additionalProperties: false, properties: { data: output } };
  // A live feed answers Server-Sent Events: the schema is one event's (what each `data:` line holds).
  const content = op.live
    ? { [EVENT_STREAM]: { schema: { ...output, description: op.live.format } } }
    : {
        'application/json': { schema: success },
        ...(op.streamed ? { [NDJSON]: { schema: { type: 'object', description: 'One JSON object per line.' } } } : {}),
      };

  return {
    // A legacy alias is its own operation to clients generated from the document: ids are unique.
    operationId: route.deprecated && op.rest.some((other) => !other.deprecated) ? `${op.name}Legacy` : op.name,
    summary: op.title,
    description: op.description,
    // Grouped by the resource an operation belongs to (`setupTokens.create` → setupTokens),
    // so the legacy aliases sit beside the routes they mirror.
    tags: [op.name.split('.')[0]],
    ...(route.deprecated ? { deprecated: true } : {}),
    security: publicRoute ? [] : security(op),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.method === 'POST' && Object.keys(rest.properties ?? {}).length + (rest.anyOf?.length ?? 0) > 0
      ? { requestBody: { required: (rest.required ?? []).length > 0 || Boolean(rest.anyOf), content: { 'application/json': { schema: rest } } } }
      : {}),
    responses: {
      [String(route.status ?? 200)]: {
        description: op.streamed
          ? `Success, streamed. With \`Accept: ${NDJSON}\`: the other fields on the first line, one item of \`${op.streamed.listKey}\` per line, \`{"${op.streamed.countKey}": n}\` last.`
          : op.live
            ? `Success: an endless stream. ${op.live.format}`
            : 'Success.',
        ...(op.paged ? { headers: { Link: linkHeader } } : {}),
        content,
      },
      ...Object.fromEntries(
        statuses.map((status) => [
          String(status),
          { description: statusText[status], content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
        ]),
      ),
    },
  };
}

/** OpenAPI 3.1 built from the same route table and zod schemas the server runs. */
export function buildOpenApi(routes: Route[], options: { version: string; serverUrl: string }): Record<string, unknown> {
  const { schemas, named } = componentSchemas();
  const paths: Record<string, Record<string, unknown>> = extraPaths();
  for (const route of routes) {
    paths[route.path] ??= {};
    paths[route.path]![route.method.toLowerCase()] = referToNamed(operationObject(route), named);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Device Function Control Service API',
      version: options.version,
      description:
        'Owners attach devices with setup tokens, give agents access (read or act ceilings) and grant them device functions; agents request actions; devices fetch, run and report them. Agents may also use the MCP endpoint at /mcp.',
    },
    servers: [{ url: options.serverUrl }],
    paths,
    components: {
      schemas: { ...schemas, Error: errorEnvelope },
      securitySchemes: {
        ...Object.fromEntries(
          Object.values(securitySchemes).map(({ scheme, description, bearerFormat }) => [
            scheme,
            { type: 'http', scheme: 'bearer', description, ...(bearerFormat ? { bearerFormat } : {}) },
          ]),
        ),
        oauth: {
          type: 'oauth2',
          description: 'OAuth 2.1 access token (`dfc_oauth_…`) bound to the resource `${PUBLIC_BASE_URL}/mcp`; scopes are a ceiling only.',
          flows: {
            authorizationCode: {
              authorizationUrl: `${options.serverUrl}/oauth/authorize`,
              tokenUrl: `${options.serverUrl}/oauth/token`,
              refreshUrl: `${options.serverUrl}/oauth/token`,
              scopes: { read: 'Call read functions and read state.', act: 'Also call control functions (implies read).' },
            },
          },
        },
        metricsToken: { type: 'http', scheme: 'bearer', description: 'The METRICS_TOKEN of the deployment.' },
      },
    },
  };
}
