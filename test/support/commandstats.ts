import type Redis from 'ioredis';

/** INFO commandstats of a private server: calls by command, scripts' own commands included. */
async function callsByCommand(redis: Redis): Promise<Record<string, number>> {
  const calls: Record<string, number> = {};
  for (const [, name, n] of (await redis.info('commandstats')).matchAll(
    /cmdstat_(\S+?):calls=(\d+)/g,
  )) {
    calls[name!] = Number(n);
  }
  return calls;
}

/**
 * The commands a private server ran while `run` ran, by command, the scripts' own commands
 * included and the scripts themselves (EVALSHA, EVAL) and INFO not. Nothing else may use the
 * server meanwhile.
 */
export async function commandsRunBy(
  redis: Redis,
  run: () => Promise<void>,
): Promise<Record<string, number>> {
  const before = await callsByCommand(redis);
  await run();
  const ran: Record<string, number> = {};
  for (const [name, calls] of Object.entries(await callsByCommand(redis))) {
    const added = calls - (before[name] ?? 0);
    if (added > 0 && !['info', 'evalsha', 'eval'].includes(name)) ran[name] = added;
  }
  return ran;
}
