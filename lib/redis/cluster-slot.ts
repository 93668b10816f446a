import type { Cluster } from 'ioredis';

/**
 * The Redis Cluster hash slot of a key, as the server computes it: CRC16 (XMODEM) of the key's
 * hash tag — the text between the first `{` and the first `}` after it, when not empty — or of the
 * whole key, modulo 16384. Lets the watchdog tell which node serves a lock without asking Redis.
 */
export function clusterSlot(key: string): number {
  const bytes = Buffer.from(key);
  const open = bytes.indexOf(0x7b); // '{'
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1); // '}'
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % 16384;
  }
  return crc16(bytes) % 16384;
}

/**
 * The node serving `key`'s slot as `cluster` last knew it (else the slot): a lock whose slot moved
 * since answers late or through a redirect, never for another node's locks.
 */
export function clusterNodeOf(cluster: Cluster, key: string): string {
  const slot = clusterSlot(key);
  return cluster.slots?.[slot]?.[0] ?? `slot ${slot}`;
}

const TABLE = Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : crc << 1;
  return crc & 0xffff;
});

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  // The index is masked to 0..255, and TABLE has an entry for each.
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}
