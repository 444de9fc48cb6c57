import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';

/**
 * server.json, the service's entry for the MCP registry, against the registry's own dated schema
 * (vendored byte for byte under vendor/mcp-registry-schema, its source in source.json there).
 */
const root = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');
const server = JSON.parse(read('server.json')) as {
  $schema: string;
  name: string;
  version: string;
  remotes: { type: string; url: string; variables?: Record<string, { isRequired?: boolean; description?: string }> }[];
};
const schemaText = read('vendor/mcp-registry-schema/server.schema.json');
const schema = JSON.parse(schemaText) as { $id: string };
const source = JSON.parse(read('vendor/mcp-registry-schema/source.json')) as { url: string; sha256: string };
const pkg = JSON.parse(read('package.json')) as { name: string; version: string };

describe('server.json', () => {
  it('is valid against the MCP registry schema 2025-12-11', () => {
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats.default(ajv);
    const validate = ajv.compile(schema);
    expect(validate(server), JSON.stringify(validate.errors, null, 2)).toBe(true);
  });

  it('names the vendored schema, which is the unchanged copy its source note describes', () => {
    expect(server.$schema).toBe('https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json');
    expect(schema.$id).toBe(server.$schema);
    expect(source.url).toBe(server.$schema);
    expect(createHash('sha256').update(schemaText).digest('hex')).toBe(source.sha256);
  });

  it('carries the name and version of package.json', () => {
    expect(server.name.split('/')[1]).toBe(pkg.name);
    expect(server.version).toBe(pkg.version);
  });

  it('offers one streamable-http remote whose URL template declares each of its variables', () => {
    expect(server.remotes).toHaveLength(1);
    const [remote] = server.remotes;
    expect(remote!.type).toBe('streamable-http');
    expect(remote!.url).toBe('https://{host}/mcp');
    const used = [...remote!.url.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]);
    expect(Object.keys(remote!.variables ?? {}).sort()).toEqual(used.sort());
    for (const name of used) {
      expect(remote!.variables![name!]!.isRequired).toBe(true);
      expect(remote!.variables![name!]!.description).toBeTruthy();
    }
  });
});
