/**
 * Suites that need the test-only server binaries CI keeps beside the clone
 * (`../shared/redis-versions/`). `npm test` and a plain `jest` leave them out, so both pass on a
 * fresh clone with nothing but a Redis; `npm run test:matrix` runs them (with `TEST_MATRIX=1`),
 * or says SKIPPED when the binaries are absent. Path patterns, as Jest matches them.
 */
module.exports = ['/test/topology/redis62\\.e2e-spec\\.ts$'];
