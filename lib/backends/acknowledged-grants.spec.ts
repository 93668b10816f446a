import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { RedisUnavailableError } from '../errors/errors';
import { AcknowledgedGrants } from './acknowledged-grants';

/** A stand-in for an ioredis connection: `WAIT` answers what the test tells it to. */
class FakeConnection extends EventEmitter {
  status = 'ready';
  waitReply: () => Promise<number> = () => Promise.resolve(1);
  readonly duplicates: FakeConnection[] = [];
  wait(): Promise<number> {
    return this.waitReply();
  }
  duplicate(): FakeConnection {
    const copy = new FakeConnection();
    this.duplicates.push(copy);
    return copy;
  }
  quit(): Promise<string> {
    this.status = 'end';
    return Promise.resolve('OK');
  }
}

const setup = () => {
  const source = new FakeConnection();
  const grants = new AcknowledgedGrants(source as unknown as Redis, {
    minReplicas: 1,
    timeout: 100,
  });
  return { source, grants };
};

describe('AcknowledgedGrants', () => {
  it('runs the grant and its WAIT on a connection of its own, not the source', async () => {
    const { source, grants } = setup();
    const used: unknown[] = [];
    const fence = await grants.run(
      'k',
      (client) => {
        used.push(client);
        return Promise.resolve(7);
      },
      () => Promise.resolve(),
    );
    expect(fence).toBe(7);
    expect(used).toEqual([source.duplicates[0]]);
  });

  it('does not count a WAIT answered after the connection dropped: rolled back, unavailable', async () => {
    const { source, grants } = setup();
    const rollback = jest.fn(() => Promise.resolve());
    const run = grants.run(
      'k',
      (client) => {
        const connection = client as unknown as FakeConnection;
        // The WAIT is answered 1, but only after a reset: a re-send, maybe to a new primary.
        connection.waitReply = () => {
          connection.emit('close');
          return Promise.resolve(1);
        };
        return Promise.resolve(7);
      },
      rollback,
    );
    await expect(run).rejects.toBeInstanceOf(RedisUnavailableError);
    expect(rollback).toHaveBeenCalledTimes(1);
    expect(source.duplicates).toHaveLength(1);
  });

  it('rolls back a grant too few replicas acknowledged', async () => {
    const { source, grants } = setup();
    const rollback = jest.fn(() => Promise.resolve());
    source.duplicate = () => {
      const copy = FakeConnection.prototype.duplicate.call(source);
      copy.waitReply = () => Promise.resolve(0);
      return copy;
    };
    await expect(grants.run('k', () => Promise.resolve(3), rollback)).rejects.toThrow(
      /Only 0 of 1 replicas/,
    );
    expect(rollback).toHaveBeenCalledTimes(1);
  });

  it('does not WAIT for a refused grant', async () => {
    const { grants } = setup();
    expect(await grants.run('k', () => Promise.resolve(-500), jest.fn())).toBe(-500);
  });

  it('spreads concurrent grants over up to 4 connections, and replaces one that ended', async () => {
    const { source, grants } = setup();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const runs = Array.from({ length: 6 }, () =>
      grants.run('k', () => gate.then(() => 1), jest.fn()),
    );
    expect(source.duplicates).toHaveLength(4);
    open();
    await Promise.all(runs);
    source.duplicates[0]!.emit('end');
    await grants.run('k', () => Promise.resolve(1), jest.fn());
    expect(source.duplicates).toHaveLength(4);
    source.duplicates[1]!.emit('end');
    source.duplicates[2]!.emit('end');
    source.duplicates[3]!.emit('end');
    await grants.run('k', () => Promise.resolve(1), jest.fn());
    expect(source.duplicates).toHaveLength(5);
    await grants.close(100);
    expect(source.duplicates[4]!.status).toBe('end');
  });
});
