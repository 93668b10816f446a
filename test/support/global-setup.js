/**
 * jest globalSetup of the e2e project: fail fast, with instructions, when the shared Redis is not
 * there — instead of every test timing out one by one.
 */
const Redis = require('ioredis');

module.exports = async function globalSetup() {
  const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 2_000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // The connection error (ECONNREFUSED, ETIMEDOUT…) says more than the "Connection is closed" the
  // command then fails with.
  let connectionError;
  redis.on('error', (error) => (connectionError = error));
  try {
    await redis.connect();
    const pong = await redis.ping();
    if (pong !== 'PONG') throw new Error(`PING answered ${pong}`);
  } catch (error) {
    throw new Error(
      `The e2e tests need a Redis at ${url} (REDIS_URL), but it did not answer PING: ` +
        `${String((connectionError ?? error).message ?? error).replace(/\.$/, '')}.\n` +
        "Start one with `redis-server --save '' --appendonly no --daemonize yes`, " +
        'or `docker run -d -p 127.0.0.1:6379:6379 redis:7`, or point REDIS_URL at a running Redis.',
    );
  } finally {
    redis.disconnect();
  }
};
