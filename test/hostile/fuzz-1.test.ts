import { fuzzRoutes } from '../helpers/route-fuzz.js';

// Hostile input for every route of the REST table, one of the files they are dealt across (test/helpers/route-fuzz.ts).
fuzzRoutes(1);
