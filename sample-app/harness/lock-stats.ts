import type { LockFamilyStats } from '../observability/lock-stats';

export type { LockFamilyStats };

/** A replica's lock event figures per key family (`GET /lock-stats`; LOCKS=on replicas only). */
export async function readLockStats(baseUrl: string): Promise<Record<string, LockFamilyStats>> {
  const response = await fetch(`${baseUrl}/lock-stats`);
  if (response.status !== 200) throw new Error(`GET /lock-stats: ${response.status}`);
  return (await response.json()) as Record<string, LockFamilyStats>;
}

/** Clears them (`DELETE /lock-stats`), so what follows is counted alone. */
export async function resetLockStats(baseUrl: string): Promise<void> {
  const response = await fetch(`${baseUrl}/lock-stats`, { method: 'DELETE' });
  if (response.status !== 204) throw new Error(`DELETE /lock-stats: ${response.status}`);
}
