import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import Redis from 'ioredis';
import { freePort } from '../../test/support/free-port';

/** The Redis the bench runs against: its own `redis-server`, or an external one (BENCH_REDIS_URL). */
export interface BenchRedis {
  readonly url: string;
  /** True when the bench started this server (then it may read and reset its stats freely). */
  readonly owned: boolean;
  readonly version: string;
  stop(): Promise<void>;
}

async function ping(url: string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const info = await client.info('server');
      client.disconnect();
      return /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
    } catch (error) {
      client.disconnect();
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

const started = new Set<ChildProcess>();

// Whatever happens to the bench, never leave a redis-server of ours behind.
process.on('exit', () => {
  for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
});

/**
 * Starts `redis-server` on a free loopback port, with no persistence, in the foreground (so its
 * pid is ours to stop), or uses BENCH_REDIS_URL when set (never flushed, reset or reconfigured).
 */
export async function startBenchRedis(): Promise<BenchRedis> {
  const external = process.env.BENCH_REDIS_URL;
  if (external) {
    const version = await ping(external, 5_000);
    return { url: external, owned: false, version, stop: async () => undefined };
  }
  const port = await freePort();
  const child = spawn(
    process.env.BENCH_REDIS_SERVER ?? 'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
      '--loglevel',
      'warning',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  started.add(child);
  const exited = once(child, 'exit');
  const failed = once(child, 'error').then(([error]) => {
    throw new Error(`could not start redis-server (is it on PATH?): ${String(error)}`);
  });
  const url = `redis://127.0.0.1:${port}`;
  const version = await Promise.race([
    ping(url, 10_000),
    failed,
    exited.then(() => {
      throw new Error(`redis-server on port ${port} exited at startup`);
    }),
  ]);
  return {
    url,
    owned: true,
    version,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
      started.delete(child);
    },
  };
}

/** Deletes every key matching one of `patterns` (SCAN + UNLINK): the bench's own keys only. */
export async function deleteKeys(url: string, patterns: string[]): Promise<number> {
  const client = new Redis(url);
  let deleted = 0;
  try {
    for (const match of patterns) {
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) deleted += await client.unlink(...keys);
      } while (cursor !== '0');
    }
  } finally {
    client.disconnect();
  }
  return deleted;
}
