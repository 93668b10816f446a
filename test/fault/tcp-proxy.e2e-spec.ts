/**
 * The TCP proxy itself: the partition and lost-reply scenarios are only as good as its control of
 * the traffic between a client and Redis.
 */
import Redis from 'ioredis';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { closeAllProxies, startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { now, sleep, waitFor } from '../support/time';
import { outcome } from './fault-support';

let server: RedisServer;
let direct: Redis;
const clients: Redis[] = [];

/** A client through `proxy` that gives up on a command after `commandTimeout` ms. */
function clientThrough(proxy: TcpProxy, commandTimeout = 500): Redis {
  const client = new Redis(proxy.url, { commandTimeout, maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

beforeAll(async () => {
  server = await startRedis();
  direct = new Redis(server.url);
});

afterAll(async () => {
  for (const client of clients) client.disconnect();
  direct.disconnect();
  await closeAllProxies();
  await stopAllRedis();
});

describe('test harness: TCP proxy in front of a private redis-server', () => {
  it('forwards commands and replies, pipelined ones included', async () => {
    const proxy = await startTcpProxy(server.port);
    const client = clientThrough(proxy);
    const replies = await Promise.all(
      Array.from({ length: 200 }, (_, i) => client.set(`proxy:k${i}`, 'x'.repeat(i * 50))),
    );
    expect(replies.every((reply) => reply === 'OK')).toBe(true);
    expect(await client.get('proxy:k199')).toBe('x'.repeat(199 * 50));
    expect(proxy.connectionCount).toBe(1);
    expect(proxy.commands.some((args) => args[0] === 'set' && args[1] === 'proxy:k7')).toBe(true);
  });

  it('blackholes both directions and delivers the held traffic on heal()', async () => {
    const proxy = await startTcpProxy(server.port);
    const client = clientThrough(proxy, 5_000);
    await client.ping();
    proxy.blackhole();
    const pending = client.set('proxy:held', '1');
    await sleep(150);
    expect(await direct.exists('proxy:held')).toBe(0); // the command never left the proxy
    proxy.heal();
    expect(await pending).toBe('OK');
    expect(await direct.get('proxy:held')).toBe('1');
  });

  it('drops replies while the commands still run, and ends those connections on heal()', async () => {
    const proxy = await startTcpProxy(server.port);
    const client = clientThrough(proxy, 300);
    await client.ping();
    proxy.dropReplies();
    const result = await outcome(client.set('proxy:one-way', '1'));
    expect(result.ok).toBe(false); // timed out: the reply was dropped
    expect(await direct.get('proxy:one-way')).toBe('1'); // but the server ran it
    proxy.heal();
    expect(proxy.connectionCount).toBe(0);
    await waitFor(async () => (await outcome(client.ping())).ok, 3_000);
  });

  it('drops the reply of one command, then cuts or stalls the connection', async () => {
    const proxy = await startTcpProxy(server.port);
    const client = clientThrough(proxy, 300);
    await client.ping();

    const dropped = proxy.dropReplyTo((args) => args[0] === 'incr', 'reset');
    const first = await outcome(client.incr('proxy:counter'));
    expect(await dropped).toEqual(['incr', 'proxy:counter']);
    // ioredis re-sends a command left unanswered by a closed connection: it may run twice.
    expect(Number(await direct.get('proxy:counter'))).toBeGreaterThanOrEqual(1);
    expect(first.ok || (first as { error: Error }).error.message.length > 0).toBe(true);

    await waitFor(async () => (await outcome(client.ping())).ok, 3_000);
    void proxy.dropReplyTo((args) => args[0] === 'set', 'stall');
    expect((await outcome(client.set('proxy:stalled', '1'))).ok).toBe(false);
    expect((await outcome(client.ping())).ok).toBe(false); // nothing flows after the lost reply
    expect(await direct.get('proxy:stalled')).toBe('1');
    proxy.resetConnections();
    await waitFor(async () => (await outcome(client.ping())).ok, 3_000);
  });

  it('runs a hook when a command passes, and adds latency', async () => {
    const proxy = await startTcpProxy(server.port);
    const client = clientThrough(proxy, 2_000);
    await client.ping();
    const seen: string[] = [];
    void proxy.onCommand(
      (args) => args[0] === 'get',
      'request',
      () => seen.push('request'),
    );
    void proxy.onCommand(
      (args) => args[0] === 'get',
      'reply',
      () => seen.push('reply'),
    );
    await client.get('proxy:x');
    expect(seen).toEqual(['request', 'reply']);

    proxy.setLatency(60);
    const started = now();
    await client.ping();
    expect(now() - started).toBeGreaterThanOrEqual(110);
    proxy.setLatency(0);
  });
});
