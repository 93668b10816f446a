import { RedisLockConfigError } from '../errors/errors';
import type { RedisLockModuleOptions } from './redis-lock-options';
import { resolveOptions } from './resolve-options';

const redis = 'redis://127.0.0.1:6379';
const loose = (options: object): RedisLockModuleOptions => options;

describe('resolveOptions: telemetry', () => {
  it('keeps lock keys out of spans by default', () => {
    expect(resolveOptions({ redis }).telemetry).toEqual({ keys: 'none' });
    expect(resolveOptions({ redis, telemetry: {} }).telemetry).toEqual({ keys: 'none' });
  });

  it.each(['none', 'hashed', 'plain'] as const)('accepts keys: %p', (keys) => {
    expect(resolveOptions({ redis, telemetry: { keys } }).telemetry).toEqual({ keys });
  });

  it.each([
    [{ keys: 'sha256' }, /telemetry\.keys/],
    [{ keys: true }, /telemetry\.keys/],
    ['hashed', /`telemetry`/],
    [null, /`telemetry`/],
  ])('rejects telemetry = %p, naming the option', (telemetry, name) => {
    expect(() => resolveOptions(loose({ redis, telemetry }))).toThrow(RedisLockConfigError);
    expect(() => resolveOptions(loose({ redis, telemetry }))).toThrow(name);
  });

  it('refuses an unknown telemetry option and names the closest valid one', () => {
    expect(() => resolveOptions(loose({ redis, telemetry: { key: 'plain' } }))).toThrow(
      /`key`.*did you mean `keys`\?/,
    );
  });
});
