import { LockUpgradeError, RedisLockConfigError } from '../errors/errors';
import { readWriteRequest } from './read-write-options';

const plain = { writerPriority: true };

describe('readWriteRequest', () => {
  it('asks for the key alone by default, and a share for reads', () => {
    expect(readWriteRequest({}, plain)).toEqual({
      kind: { type: 'exclusive' },
      writerPriority: true,
    });
    expect(readWriteRequest({ mode: 'write', writerPriority: false }, plain)).toEqual({
      kind: { type: 'exclusive' },
      writerPriority: false,
    });
    expect(readWriteRequest({ mode: 'read' }, plain).kind).toEqual({ type: 'read' });
  });

  it.each([
    [{ mode: 'shared' }, plain, /`mode` is "shared"; expected 'read' or 'write'/],
    [{ writerPriority: 1 }, plain, /`writerPriority` is 1; expected a boolean/],
    [{ mode: 'read', writerPriority: true }, plain, /applies to writers/],
  ])('refuses %j with %j', (options, module, message) => {
    const call = () => readWriteRequest(options as never, module);
    expect(call).toThrow(RedisLockConfigError);
    expect(call).toThrow(message);
  });
});

it('names what to do when a read is upgraded', () => {
  expect(new LockUpgradeError('doc:7').message).toMatch(/write lock .* in the outer call/);
});
