// INFO commandstats readings shared by the cost tools (compare-builds, lease-cost, script-cost).
'use strict';

/** INFO commandstats as { command: { calls, usec } }. */
async function commandStats(client) {
  const stats = {};
  for (const m of (await client.info('commandstats')).matchAll(
    /cmdstat_(\S+?):calls=(\d+),usec=(\d+)/g,
  )) {
    stats[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  }
  return stats;
}

/**
 * Redis' cost per op between two snapshots: `usec`, what the scripts the client sent took (EVAL and
 * EVALSHA include the commands their scripts ran), and `inner`, how many commands scripts ran.
 */
function scriptCost(before, after, ops) {
  let usec = 0;
  let inner = 0;
  for (const [name, now] of Object.entries(after)) {
    if (name === 'evalsha' || name === 'eval') usec += now.usec - (before[name]?.usec ?? 0);
    else if (name !== 'info') inner += now.calls - (before[name]?.calls ?? 0);
  }
  return { usec: usec / ops, inner: inner / ops };
}

module.exports = { commandStats, scriptCost };
