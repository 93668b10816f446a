/**
 * The test harness itself: the fault suites are only as good as their control of redis-server.
 */
import Redis from 'ioredis';
import { freePort } from './support/free-port';
import { ping, startRedis, stopAllRedis } from './support/redis-server';
import { signalPid } from './support/tracked-pids';

const isAlive = (pid: number): boolean => signalPid(pid, 0 as unknown as NodeJS.Signals);

describe('test harness: private redis-server', () => {
  afterAll(() => stopAllRedis());

  it('starts redis-server on a free port, answering PING, with no persistence', async () => {
    const server = await startRedis();
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    const redis = new Redis(server.url);
    try {
      expect(await redis.ping()).toBe('PONG');
      expect(await redis.config('GET', 'save')).toEqual(['save', '']);
      expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
    } finally {
      redis.disconnect();
    }
    await server.stop();
  });

  it('pauses (no answers) and resumes a server', async () => {
    const server = await startRedis();
    server.pause();
    expect(await ping(server.port, 200)).toBe(false);
    server.resume();
    expect(await ping(server.port, 2_000)).toBe(true);
    await server.stop();
  });

  it('kills a server and restarts it, empty, on the same port', async () => {
    const server = await startRedis();
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    try {
      await redis.set('k', 'v');
      const firstPid = server.pid;
      await server.kill();
      expect(server.running).toBe(false);
      expect(isAlive(firstPid)).toBe(false);
      expect(await ping(server.port, 200)).toBe(false);

      await server.restart();
      expect(server.pid).not.toBe(firstPid);
      expect(await ping(server.port, 2_000)).toBe(true);
      expect(await redis.get('k')).toBeNull();
    } finally {
      redis.disconnect();
    }
  });

  it('stops a paused server', async () => {
    const server = await startRedis();
    const pid = server.pid;
    server.pause();
    await server.stop();
    expect(isAlive(pid)).toBe(false);
  });

  it('stopAllRedis() stops every server the file started', async () => {
    const servers = await Promise.all([startRedis(), startRedis()]);
    const pids = servers.map((server) => server.pid);
    await stopAllRedis();
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
  });

  it('finds ports nothing listens on', async () => {
    expect(await ping(await freePort(), 200)).toBe(false);
  });
});
