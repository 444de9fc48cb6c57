import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { configSchema } from '../../src/config.js';
import { generatedPages, parts, root } from '../../scripts/docs-generate.js';

/**
 * The parts of docs/ whose source is the code (the configuration reference from the config
 * schema, the error codes, the action states, the event catalogue) read exactly as
 * `npm run docs:generate` would write them now.
 */
describe('generated docs', () => {
  const pages = generatedPages();

  it.each([...new Set(parts.map((part) => part.file))])('%s matches the code (run npm run docs:generate)', (file) => {
    expect(fs.readFileSync(path.join(root, file), 'utf8')).toBe(pages.get(file));
  });
});

describe('the configuration reference', () => {
  const page = fs.readFileSync(path.join(root, 'docs/operators/configuration.md'), 'utf8');
  const shape: Record<string, z.ZodType> = configSchema.shape;

  it.each(Object.keys(shape))('gives %s a meaning in src/config.ts (.describe)', (name) => {
    expect(shape[name]!.description?.length ?? 0).toBeGreaterThan(10);
  });

  it.each(Object.entries(shape).filter(([, field]) => field instanceof z.ZodDefault))('shows the default of %s that the schema applies', (name, field) => {
    const applied = configSchema.safeParse({}).data?.[name as keyof z.infer<typeof configSchema>];
    const shown = new RegExp(`^\\| \`${name}\` \\| \`([^\`]*)\` \\|`, 'm').exec(page)?.[1];
    expect(shown, `${name} has a default in the table`).toBeDefined();
    // The table shows what an operator would type; the schema parses it to the value it applies.
    expect((field as z.ZodType).parse(shown)).toEqual(applied);
  });
});
