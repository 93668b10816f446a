import { EventEmitter } from 'node:events';
import Redis, { Cluster, ReplyError } from 'ioredis';
import { RedisUnavailableError } from '../errors/errors';
import { ClientWatch, ConnectionWatch } from './connection-watch';
import { describeAddress } from './redis-address';
import type { RedisClient } from './redis-client';

/** A client double: ioredis' events and status, nothing else. */
function fakeClient(status = 'connecting'): RedisClient & EventEmitter {
  return Object.assign(new EventEmitter(), { status }) as unknown as RedisClient & EventEmitter;
}

const refused = (): Error =>
  Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:6379'), { code: 'ECONNREFUSED' });

describe('ConnectionWatch', () => {
  it('blocks a client that never came up once a connection error arrives, with that cause', () => {
    const client = fakeClient();
    const watch = new ConnectionWatch([new ClientWatch(client, '10.0.0.1:6379')], 1, 'x');
    expect(watch.unavailable()).toBeUndefined();
    client.emit('error', refused());
    const error = watch.unavailable();
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect(error?.message).toMatch(/^Redis 10\.0\.0\.1:6379: connection refused/);
    expect((error?.cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
  });

  it('does not block a once-healthy client that is reconnecting', () => {
    const client = fakeClient();
    const watch = new ConnectionWatch([new ClientWatch(client, 'a')], 1, 'a');
    client.emit('ready');
    client.emit('error', refused());
    expect(watch.unavailable()).toBeUndefined();
  });

  it('blocks on a credentials error even after being ready, until ready again', () => {
    const client = fakeClient();
    const watch = new ConnectionWatch([new ClientWatch(client, 'a')], 1, 'a');
    client.emit('ready');
    client.emit('error', new ReplyError('WRONGPASS invalid username-password pair'));
    expect(watch.unavailable()?.message).toMatch(/wrong username or password/);
    client.emit('ready');
    expect(watch.unavailable()).toBeUndefined();
  });

  it('rejects a pending command as soon as the first connection error arrives', async () => {
    const client = fakeClient();
    const watch = new ConnectionWatch([new ClientWatch(client, 'a')], 1, 'a');
    const guarded = watch.guard(new Promise(() => undefined));
    client.emit('error', refused());
    await expect(guarded).rejects.toBeInstanceOf(RedisUnavailableError);
  });

  it('passes commands through untouched once every node has been ready', async () => {
    const client = fakeClient('ready');
    const watch = new ConnectionWatch([new ClientWatch(client, 'a')], 1, 'a');
    const command = Promise.resolve(1);
    expect(watch.guard(command)).toBe(command);
  });

  it('blocks a Redlock quorum only when too few nodes can answer', () => {
    const clients = [fakeClient(), fakeClient(), fakeClient()];
    const watch = new ConnectionWatch(
      clients.map((client, i) => new ClientWatch(client, `n${i}`)),
      2,
      'redlock',
    );
    clients[0]!.emit('error', refused());
    expect(watch.unavailable()).toBeUndefined();
    clients[1]!.emit('error', refused());
    expect(watch.unavailable()?.message).toMatch(/^Redis n0: .*Redis n1: /);
  });
});

describe('describeAddress', () => {
  const clients: RedisClient[] = [];
  afterAll(() => clients.forEach((client) => client.disconnect()));
  const lazy = <T extends RedisClient>(client: T): T => (clients.push(client), client);

  it('names host and port of a URL, never its password', () => {
    const client = lazy(
      new Redis('redis://app:s3cret@cache.internal:6380/2', { lazyConnect: true }),
    );
    expect(describeAddress(client)).toBe('cache.internal:6380/2');
  });

  it('names the Sentinel master and the sentinels', () => {
    const client = lazy(
      new Redis({
        lazyConnect: true,
        name: 'orders',
        password: 's3cret',
        sentinels: [
          { host: '10.0.0.1', port: 26379 },
          { host: '10.0.0.2', port: 26380 },
        ],
      }),
    );
    expect(describeAddress(client)).toBe(
      'master "orders" via Sentinel 10.0.0.1:26379, 10.0.0.2:26380',
    );
  });

  it('names the Cluster startup nodes, never a password in a node URL', () => {
    const client = lazy(
      new Cluster([{ host: '10.0.0.1', port: 7000 }, 'redis://:s3cret@10.0.0.2:7001'], {
        lazyConnect: true,
      }),
    );
    expect(describeAddress(client)).toBe('Cluster 10.0.0.1:7000, 10.0.0.2:7001');
  });
});
