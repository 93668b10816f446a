import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';

export interface CommandCount {
  /** Commands clients sent (round trips, for sequential code); script-internal calls excluded. */
  total: number;
  byCommand: Record<string, number>;
  /** Commands the server ran inside Lua scripts (MONITOR's `[0 lua]` source), all scripts. */
  luaTotal: number;
  luaByCommand: Record<string, number>;
}

/**
 * Counts the commands clients send while `fn` runs, with MONITOR (outside any timed loop), and
 * apart from them the commands scripts ran inside Redis (MONITOR names their source "lua").
 */
export async function countCommands(url: string, fn: () => Promise<void>): Promise<CommandCount> {
  const monitorClient = new Redis(url);
  const markerClient = new Redis(url);
  const marker = `bench-marker-${randomUUID()}`;
  const byCommand: Record<string, number> = {};
  const luaByCommand: Record<string, number> = {};
  let total = 0;
  let luaTotal = 0;
  try {
    // Both connected before MONITOR starts: ioredis takes a command that reaches the server just
    // after MONITOR's answer (a ready check, say) for a reply of its own and fails.
    await Promise.all([monitorClient.ping(), markerClient.ping()]);
    const monitor = await monitorClient.monitor();
    let seenMarker: () => void = () => undefined;
    const markerSeen = new Promise<void>((resolve) => (seenMarker = resolve));
    let started = false;
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      const name = String(args[0]).toLowerCase();
      if (name === 'echo' && args[1] === `${marker}-start`) return void (started = true);
      if (name === 'echo' && args[1] === `${marker}-end`) return seenMarker();
      if (!started) return;
      if (source === 'lua' || source.startsWith('lua')) {
        luaTotal++;
        luaByCommand[name] = (luaByCommand[name] ?? 0) + 1;
        return;
      }
      total++;
      byCommand[name] = (byCommand[name] ?? 0) + 1;
    });
    await markerClient.echo(`${marker}-start`);
    // MONITOR output is asynchronous: wait until our own start marker came through.
    while (!started) await new Promise((resolve) => setTimeout(resolve, 1));
    await fn();
    await markerClient.echo(`${marker}-end`);
    await markerSeen;
    monitor.disconnect();
  } finally {
    monitorClient.disconnect();
    markerClient.disconnect();
  }
  return { total, byCommand, luaTotal, luaByCommand };
}

/** `INFO commandstats` as { command: calls } (e.g. { evalsha: 123 }). */
export async function commandStats(client: Redis): Promise<Record<string, number>> {
  const info = await client.info('commandstats');
  const stats: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    stats[match[1]] = Number(match[2]);
  return stats;
}
