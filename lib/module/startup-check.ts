import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import type Redis from 'ioredis';
import type { LockEngine } from '../engine/lock-engine';
import { messages } from '../errors/messages';
import {
  RedisCommandError,
  RedisLockConfigError,
  RedisLockError,
  RedisUnavailableError,
} from '../errors/errors';
import { isInternalLockSource } from '../locking/public-lock-source';
import { LockService } from '../service/lock.service';
import { ConnectionWatch, explain, type ClientWatch } from '../redis/connection-watch';
import { isClusterClient } from '../redis/redis-client';

/** The lock the check takes and releases: one fixed name, so checks never pile up keys. */
const PROBE_KEY = 'nestjs-redis-lock:startup-check';

/**
 * Checks Redis once at startup, before the application's own `onModuleInit` work (the module is
 * global, and Nest runs global modules' hooks first): a loud line when it works, the real cause
 * when it does not, and with `startupCheck: 'fail'` (the default) no application on a Redis that
 * cannot lock — after `startupRetries` more tries while Redis is out of reach.
 */
@Injectable()
export class RedisLockStartupCheck implements OnModuleInit {
  private readonly logger = new Logger('RedisLock');

  constructor(private readonly locks: LockService) {}

  async onModuleInit(): Promise<void> {
    // A test double in place of the LockService (`overrideProvider`) has no Redis to check.
    if (!isInternalLockSource(this.locks)) return;
    const { startupCheck: mode, startupRetries } = this.locks.options;
    if (mode === 'off') return;
    const started = performance.now();
    const attempts = mode === 'fail' ? startupRetries + 1 : 1;
    let attempt = 1;
    let result = await checkRedis(this.locks.engine);
    // Only an outage can end by itself (a Redis starting beside the app); a refusal cannot.
    while (result.problem && attempt < attempts && isOutage(result.problem)) {
      const delay = Math.min(500 * 2 ** (attempt - 1), 5_000);
      this.logger.warn(messages.startupRetry(attempt, attempts, result.problem.message, delay));
      await new Promise((resolve) => setTimeout(resolve, delay));
      attempt++;
      result = await checkRedis(this.locks.engine);
    }
    const { line, warnings, problem } = result;
    if (line) this.logger.log(line);
    for (const warning of warnings) this.logger.warn(warning);
    if (!problem) return;
    if (mode === 'fail') {
      // Nest runs no shutdown hooks after a failed bootstrap: close what we opened ourselves,
      // or ioredis' reconnect timer keeps the process alive.
      await this.locks.close();
      if (attempt === 1) throw problem;
      const took = (performance.now() - started) / 1_000;
      throw new RedisUnavailableError(messages.startupGaveUp(attempt, took, problem.message), {
        cause: problem,
      });
    }
    this.logger.warn(messages.startupFailed(problem.message));
  }
}

/** Redis out of reach (refused, reset, no answer): not a refusal by Redis itself. */
function isOutage(problem: RedisLockError): boolean {
  return (
    problem instanceof RedisUnavailableError && !/WRONGPASS|NOAUTH|NOPERM/.test(problem.message)
  );
}

interface CheckResult {
  /** The success line (Redis answered and ran a lock command). */
  line?: string;
  warnings: string[];
  /** Why lock calls cannot work now. */
  problem?: RedisLockError;
}

/** PING and INFO on each node, then one acquire + release; all within `commandTimeout`. */
export async function checkRedis(engine: LockEngine): Promise<CheckResult> {
  const started = performance.now();
  const timeout = engine.options.commandTimeout;
  const { connections } = engine;
  const warnings: string[] = [];
  const answers = await Promise.all(
    connections.nodes.map((node) =>
      inspectNode(node, timeout).catch((error: unknown) => asLockError(node.address, error)),
    ),
  );
  const nodeErrors = answers.filter((answer) => answer instanceof RedisLockError);
  const down = connections.unavailable();
  if (down) return { warnings, problem: down };
  if (nodeErrors.length > connections.nodes.length - connections.quorum) {
    return { warnings, problem: nodeErrors[0] };
  }
  // Redlock: a node down is worth a warning even while the others make a quorum.
  for (const error of nodeErrors) warnings.push(messages.startupNodeDown(error.message));

  const probe = await probeLockCommands(engine, Math.ceil(Math.max(1, timeout - elapsed(started))));
  // Redlock nodes that just started answer and run the scripts, but do not vote for restartGrace:
  // worth a warning, not a failed boot (a new fleet would fail every boot for that long).
  if (probe && /restarted within restartGrace/.test(probe.message)) {
    warnings.push(messages.startupNotVotingYet(probe.message));
  } else if (probe) {
    const problem =
      probe instanceof RedisCommandError
        ? new RedisCommandError(
            probe.message.replace(/^Redis /, `Redis ${connections.target} `),
            probe.code,
            { cause: probe },
          )
        : probe;
    return { warnings, problem };
  }
  // Keys of an older layout that this version would not see: a writer could get in beside them.
  const legacy = await engine
    .findLegacyKey()
    .catch((error: unknown) => asLockError(connections.target, error));
  if (legacy instanceof RedisLockError) return { warnings, problem: legacy };
  if (legacy !== undefined) {
    const problem = new RedisLockConfigError(messages.legacyLayout(legacy, engine.options.prefix));
    return { warnings, problem };
  }
  const infos = answers.filter((answer): answer is NodeInfo[] => Array.isArray(answer)).flat();
  for (const info of infos) {
    if (info.policy && info.policy !== 'noeviction') {
      warnings.push(messages.evictingPolicy(info.address, info.policy));
    }
  }
  const versions = [...new Set(infos.map((info) => info.version).filter(Boolean))];
  const details = versions.length ? ` (Redis ${versions.join(', ')})` : '';
  return {
    line: messages.startupAnswered(connections.target, elapsed(started), details),
    warnings,
  };
}

interface NodeInfo {
  address: string;
  version?: string;
  /** `maxmemory-policy`, when the user may run INFO. */
  policy?: string;
}

/** PING (the connection and its credentials), then INFO of each primary behind it. */
async function inspectNode(node: ClientWatch, timeout: number): Promise<NodeInfo[]> {
  const guard = new ConnectionWatch([node], 1, node.address);
  const bounded = <T>(command: Promise<T>): Promise<T> =>
    within(guard.guard(command), timeout, messages.startupNoAnswer(node.address, timeout));
  await bounded(node.client.ping());
  const primaries: { address: string; client: Redis }[] = isClusterClient(node.client)
    ? node.client.nodes('master').map((client) => ({
        address: `${client.options.host}:${client.options.port}`,
        client,
      }))
    : [{ address: node.address, client: node.client }];
  return Promise.all(
    primaries.map(async ({ address, client }) => {
      // INFO may be outside the user's ACL: then the policy is simply not known.
      const info = await bounded(client.info()).catch(() => '');
      return {
        address,
        version: /^redis_version:(\S+)/m.exec(info)?.[1],
        policy: /^maxmemory_policy:(\S+)/m.exec(info)?.[1],
      };
    }),
  );
}

/**
 * Takes the probe lock, is refused it once (which marks it as waited for), and releases it: the
 * scripts, their commands and PUBLISH — which a release runs only for a waited-for lock — under
 * the ACL.
 */
async function probeLockCommands(
  engine: LockEngine,
  timeout: number,
): Promise<RedisLockError | undefined> {
  try {
    const signal = AbortSignal.timeout(timeout);
    const request = {
      key: PROBE_KEY,
      ttl: Math.max(1_000, 2 * timeout),
      wait: 0,
      maxHold: Infinity,
      renew: false,
      signal,
    };
    const outcome = await engine.acquire(request);
    // Busy is fine: another instance is checking right now, and the script ran.
    if ('lock' in outcome) {
      await engine.acquire(request); // refused: the release below publishes
      await outcome.lock.release();
      await forgetProbe(engine);
    }
    return undefined;
  } catch (error) {
    if (error instanceof RedisLockError) return error;
    // The signal's TimeoutError: the engine releases a grant that lands later.
    const { commandTimeout } = engine.options;
    return new RedisUnavailableError(
      messages.startupNoAnswer(engine.connections.target, commandTimeout),
      {
        cause: error,
      },
    );
  }
}

/**
 * Deletes the probe's fence counter (and fair mode's queue keys), so the check leaves no key
 * behind: the probe's fences protect nothing. Best effort; another instance's probe may race it.
 */
async function forgetProbe(engine: LockEngine): Promise<void> {
  const { fence, queue, waiters } = engine.keysOf(PROBE_KEY);
  await Promise.all(
    engine.connections.nodes.map((node) => {
      // A Redlock node that never came up is skipped at once, not waited for.
      const command = new ConnectionWatch([node], 1, node.address).guard(
        node.client.del(fence, queue, waiters),
      );
      return within(command, engine.options.commandTimeout, '').catch(() => undefined);
    }),
  );
}

function elapsed(since: number): number {
  return performance.now() - since;
}

/** A failed command as a lock error that names where it went and the cause. */
function asLockError(address: string, error: unknown): RedisLockError {
  if (error instanceof RedisLockError) return error;
  const cause = error instanceof Error ? error : new Error(String(error));
  return new RedisUnavailableError(messages.connectionFailed(address, ...explain(cause)), {
    cause,
  });
}

/** `promise`, or a RedisUnavailableError with `message` after `ms`. */
function within<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RedisUnavailableError(message)), ms);
  });
  return Promise.race([promise, timedOut]).finally(() => clearTimeout(timer));
}
