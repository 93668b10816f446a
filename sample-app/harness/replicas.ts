import { spawnWorker, type Worker } from '../../test/support/processes';

/** One running sample-app process. */
export interface Replica {
  readonly name: string;
  readonly url: string;
  readonly worker: Worker;
}

/** Replicas started together, against one Redis and one key prefix. */
export interface Fleet {
  readonly replicas: readonly Replica[];
  readonly urls: readonly string[];
  /**
   * SIGTERM to every replica (graceful shutdown: cron stopped, locks released, Redis closed),
   * SIGKILL for any still running after `graceMs`. Never rejects; safe to call twice.
   */
  stop(graceMs?: number): Promise<void>;
}

export interface FleetOptions {
  /** How many replicas. @default 3 */
  count?: number;
  redisUrl: string;
  /** SHOP_PREFIX of every replica: all their keys (locks included) live under it. */
  prefix: string;
  /** false starts them with LOCKS=off. */
  locks: boolean;
  /** ORDER_DELAY_MS @default 20 */
  orderDelayMs?: number;
  /**
   * STOCK_WAIT_MS. Generous by default: on a loaded machine the stock queue of a burst can take
   * seconds, and a wait that runs out turns an order into a 409, so fewer units would sell.
   * @default 20000
   */
  stockWaitMs?: number;
  /** Extra environment for every replica. */
  env?: Record<string, string>;
  /** @default 30000 */
  startTimeoutMs?: number;
}

const LISTENING = /listening on port (\d+)/;

/**
 * Starts `count` sample-app processes (`node -r ts-register sample-app/main.ts`), each on a port
 * the OS picks, and resolves once all of them listen. If one fails to start, the others are
 * stopped and the error carries its output.
 */
export async function startFleet(options: FleetOptions): Promise<Fleet> {
  const count = options.count ?? 3;
  const workers: Worker[] = [];
  const names: string[] = [];
  for (let i = 1; i <= count; i++) {
    const name = `replica-${i}${options.locks ? '' : '-nolock'}`;
    names.push(name);
    workers.push(
      spawnWorker('sample-app/main.ts', {
        PORT: '0',
        REDIS_URL: options.redisUrl,
        SHOP_PREFIX: options.prefix,
        LOCKS: options.locks ? 'on' : 'off',
        ORDER_DELAY_MS: String(options.orderDelayMs ?? 20),
        STOCK_WAIT_MS: String(options.stockWaitMs ?? 20_000),
        REPLICA: name,
        NO_COLOR: '1',
        ...options.env,
      }),
    );
  }
  const fleet = makeFleet(workers, names, []);
  try {
    const ports = await Promise.all(
      workers.map(async (worker) => {
        const match = await worker.waitForOutput(LISTENING, options.startTimeoutMs ?? 30_000);
        return Number(match[1]);
      }),
    );
    return makeFleet(
      workers,
      names,
      ports.map((port) => `http://127.0.0.1:${port}`),
    );
  } catch (error) {
    await fleet.stop(0);
    const output = workers.map((w, i) => `--- ${names[i]}\n${w.stdout}${w.stderr}`).join('\n');
    throw new Error(`The replicas did not start: ${String(error)}\n${output}`);
  }
}

function makeFleet(workers: Worker[], names: string[], urls: string[]): Fleet {
  return {
    // One name and one worker per url, built together in startReplicas.
    replicas: urls.map((url, i) => ({ name: names[i]!, url, worker: workers[i]! })),
    urls,
    async stop(graceMs = 5_000) {
      await Promise.all(
        workers.map(async (worker) => {
          worker.kill('SIGTERM');
          const timer = setTimeout(() => worker.kill('SIGKILL'), graceMs);
          await worker.exited;
          clearTimeout(timer);
        }),
      );
    },
  };
}
