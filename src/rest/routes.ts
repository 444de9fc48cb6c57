import type { AnyOperation, RestRoute } from '../domain/operation.js';
import { allOperations } from '../domain/registry.js';

/** A REST route bound to the operation that declares it (src/domain/operation.ts `rest`). */
export interface Route extends RestRoute {
  operation: AnyOperation;
}

/** Whether `earlier`, matched first, would take `later`'s requests: a `{parameter}` where `later` has a literal. */
function shadows(earlier: Route, later: Route): boolean {
  const a = earlier.path.split('/');
  const b = later.path.split('/');
  return (
    earlier.method === later.method &&
    earlier.path !== later.path &&
    a.length === b.length &&
    a.every((segment, i) => segment === b[i] || segment.startsWith('{'))
  );
}

/**
 * The REST facade, derived from the registry: every route every operation declares, in
 * declaration order, except that a route goes before any route that would shadow it
 * (`/v1/actions/export` before `/v1/actions/{actionId}`): Hono matches in registration order.
 */
export const routes: Route[] = [];
for (const operation of allOperations) {
  for (const route of operation.rest) {
    const entry = { ...route, operation };
    const shadowing = routes.findIndex((earlier) => shadows(earlier, entry));
    if (shadowing === -1) routes.push(entry);
    else routes.splice(shadowing, 0, entry);
  }
}
