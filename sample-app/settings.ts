import { hostname } from 'node:os';

/** Everything the shop reads from its environment, parsed and checked once at startup. */
export interface ShopSettings {
  /** HTTP port; 0 lets the OS pick one (the harness reads it from the "listening" line). */
  port: number;
  /** Redis holding the vouchers, the orders and the locks (`REDIS_URL`). */
  redisUrl: string;
  /** `LOCKS=off` removes every lock, so the naive code races: the control run of the demo. */
  locks: boolean;
  /** Pause between the naive reads and writes (`ORDER_DELAY_MS`): the window a race needs. */
  orderDelayMs: number;
  /** How long an order waits for the voucher's stock lock (`STOCK_WAIT_MS`). */
  stockWaitMs: number;
  /** Prefix of every Redis key the shop writes, locks included (`SHOP_PREFIX`). */
  prefix: string;
  /** Name of this replica, stamped on orders and settlement runs (`REPLICA`). */
  replica: string;
  /** Vouchers created at startup when missing (`SEED_VOUCHERS=flash-sale:10,other:5`). */
  seedVouchers: ReadonlyArray<{ voucherId: string; stock: number }>;
  /** Whether the settlement cron job runs on this replica (`SETTLEMENT=off` stops it). */
  settlement: boolean;
  /** `GET /metrics` with the OpenTelemetry metrics, lock metrics included (`METRICS=off` drops it). */
  metrics: boolean;
}

export const SHOP_SETTINGS = Symbol('SHOP_SETTINGS');

/** Reads `ShopSettings` from `env`; throws one error naming every bad variable. */
export function readSettings(env: NodeJS.ProcessEnv = process.env): ShopSettings {
  const problems: string[] = [];
  const int = (name: string, fallback: number, min: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min) {
      problems.push(`${name}="${raw}" must be an integer >= ${min}`);
      return fallback;
    }
    return value;
  };
  const flag = (name: string): boolean => {
    const raw = (env[name] ?? 'on').toLowerCase();
    if (['on', 'true', '1', 'yes'].includes(raw)) return true;
    if (['off', 'false', '0', 'no'].includes(raw)) return false;
    problems.push(`${name}="${env[name]}" must be "on" or "off"`);
    return true;
  };

  const port = int('PORT', 3000, 0);
  const settings: ShopSettings = {
    port,
    redisUrl: env.REDIS_URL || 'redis://127.0.0.1:6379',
    locks: flag('LOCKS'),
    orderDelayMs: int('ORDER_DELAY_MS', 20, 0),
    stockWaitMs: int('STOCK_WAIT_MS', 5_000, 0),
    prefix: env.SHOP_PREFIX || 'shop:',
    replica: env.REPLICA || `${hostname()}:${port}`,
    seedVouchers: parseSeed(env.SEED_VOUCHERS ?? '', problems),
    settlement: flag('SETTLEMENT'),
    metrics: flag('METRICS'),
  };
  if (problems.length > 0) {
    throw new Error(`Invalid shop configuration:\n  - ${problems.join('\n  - ')}`);
  }
  return settings;
}

function parseSeed(raw: string, problems: string[]): ShopSettings['seedVouchers'] {
  return raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0)
    .flatMap((entry) => {
      const match = /^([\w.-]+):(\d+)$/.exec(entry);
      if (!match) {
        problems.push(`SEED_VOUCHERS entry "${entry}" must look like voucherId:stock`);
        return [];
      }
      const [, voucherId = '', stock] = match;
      return [{ voucherId, stock: Number(stock) }];
    });
}
