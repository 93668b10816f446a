/**
 * Two projects: fast unit specs beside the code, and e2e/fault suites against real Redis. The
 * suites that need test-only server binaries run only with `TEST_MATRIX=1` (tools/matrix-only.js).
 */
const matrixOnly = process.env.TEST_MATRIX === '1' ? [] : require('./tools/matrix-only');
const tsJest = ['ts-jest', { tsconfig: 'tsconfig.jest.json' }];
const shared = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': tsJest },
  moduleNameMapper: {
    '^nestjs-redis-lock$': '<rootDir>/lib/index.ts',
    '^nestjs-redis-lock/testing$': '<rootDir>/lib/testing/index.ts',
    '^nestjs-redis-lock/health$': '<rootDir>/lib/health/index.ts',
    '^nestjs-redis-lock/inspect$': '<rootDir>/lib/inspect.ts',
  },
};

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    { ...shared, displayName: 'unit', testMatch: ['<rootDir>/lib/**/*.spec.ts'] },
    {
      ...shared,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
      testPathIgnorePatterns: ['/node_modules/', ...matrixOnly],
      globalSetup: '<rootDir>/test/support/global-setup.js',
      setupFilesAfterEnv: ['<rootDir>/test/support/fail-on-unhandled.ts'],
    },
  ],
  testTimeout: 60_000,
};
