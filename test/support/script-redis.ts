import Redis from 'ioredis';
import { waitFor } from './time';

/**
 * What the specs of one kind's Lua scripts read Redis with: a command client on a private
 * server (so every key, TTL and message is theirs to inspect) and a subscriber whose log is
 * read up to a marker, so "nothing was published" is an exact, bounded check and never a sleep.
 */
export class ScriptRedis {
  private readonly log = new Map<string, string[]>();

  private constructor(
    readonly client: Redis,
    private readonly subscriber: Redis,
  ) {
    subscriber.on('message', (channel: string, message: string) => {
      this.log.get(channel)?.push(message);
    });
  }

  static async connect(url: string): Promise<ScriptRedis> {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    const subscriber = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await Promise.all([client.connect(), subscriber.connect()]);
    return new ScriptRedis(client, subscriber);
  }

  /** Starts recording what is published on `channel`. */
  async listen(channel: string): Promise<void> {
    if (this.log.has(channel)) return;
    this.log.set(channel, []);
    await this.subscriber.subscribe(channel);
  }

  /**
   * Everything published on `channel` since the last call (or `listen`), in order: a marker
   * published now arrives after all of it (one server delivers a channel's messages in order).
   */
  async published(channel: string): Promise<string[]> {
    const seen = this.log.get(channel);
    if (!seen) throw new Error(`Not listening on ${channel}`);
    const marker = `marker:${Math.random()}`;
    await this.client.publish(channel, marker);
    await waitFor(() => seen.includes(marker), 2_000, 2);
    const before = seen.splice(0, seen.length);
    return before.slice(0, before.indexOf(marker));
  }

  /** Each key under `prefix` with its PTTL (-1: no TTL), for "every key written expires". */
  async ttls(prefix: string): Promise<Record<string, number>> {
    const names = await this.client.keys(`${prefix}*`);
    const ttls: Record<string, number> = {};
    for (const name of names.sort()) ttls[name] = await this.client.pttl(name);
    return ttls;
  }

  /** Redis' clock in µs, the base a new fence counter starts from. */
  async micros(): Promise<number> {
    const [seconds, micros] = await this.client.time();
    return Number(seconds) * 1_000_000 + Number(micros);
  }

  /** Redis' clock in ms, the clock every lease end is scored on. */
  async millis(): Promise<number> {
    return Math.floor((await this.micros()) / 1000);
  }

  close(): void {
    this.subscriber.disconnect();
    this.client.disconnect();
  }
}

/** Asserts every key under `prefix` has a TTL (and that there is at least one), and returns them. */
export async function expectAllExpire(
  redis: ScriptRedis,
  prefix: string,
): Promise<Record<string, number>> {
  const ttls = await redis.ttls(prefix);
  expect(Object.keys(ttls).length).toBeGreaterThan(0);
  for (const [name, ttl] of Object.entries(ttls)) {
    expect({ name, expires: ttl > 0 }).toEqual({ name, expires: true });
  }
  return ttls;
}
