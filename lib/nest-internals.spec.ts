/**
 * Every Nest internal that nest-internals.ts names still means what we read it as, on the NestJS
 * the suite runs on (11). `npm run test:nest-internals` runs the same checks on NestJS 10 and 12.
 */
import * as internals from './nest-internals';

interface CheckResult {
  name: string;
  ok: boolean;
  detail?: string;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { checkNestInternals } = require('../compat/nest-internals-checks.js') as {
  checkNestInternals(
    pinned: typeof internals,
    load: (name: string) => unknown,
  ): Promise<CheckResult[]>;
};

it('reads every metadata key, parameter number and injector record as Nest 11 writes them', async () => {
  const results = await checkNestInternals(internals, require);
  expect(results.filter((result) => !result.ok)).toEqual([]);
  expect(results.map((result) => result.name.split(':')[0])).toEqual([
    'interceptors',
    'routeArgs + HttpParamType',
    'customRouteArgs',
    'responsePassthrough',
    'sse',
    'path + method',
    'propertyDeps',
    'exceptionFilters',
    'filterCatch',
    'render + redirect',
    'moduleImports/Providers/Exports',
    'pattern + patternHandler + payload',
    'gateway + messageMapping + payload (+ ack)',
    'resolverType + resolveField + GqlParamType',
    'schedulerType',
    'injector records + global filters + replaceFactory',
    'configure()',
  ]);
});
