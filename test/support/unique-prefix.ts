import { randomBytes } from 'node:crypto';

/**
 * A key prefix no other test (or test run) uses, for tests on the shared Redis:
 * `test:<name>:<random>:`. Delete what it wrote with `deleteKeys(prefix)` in `afterAll`.
 */
export function uniquePrefix(name: string): string {
  return `test:${name}:${randomBytes(4).toString('hex')}:`;
}
