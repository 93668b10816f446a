import { clusterSlot } from './cluster-slot';

describe('clusterSlot', () => {
  it('gives the slots Redis gives (CLUSTER KEYSLOT)', () => {
    expect(clusterSlot('foo')).toBe(12182);
    expect(clusterSlot('bar')).toBe(5061);
    expect(clusterSlot('123456789')).toBe(0x31c3 % 16384);
  });

  it('hashes the hash tag only, when it is not empty', () => {
    expect(clusterSlot('lock:{order:7}')).toBe(clusterSlot('order:7'));
    expect(clusterSlot('lock:{order:7}:fence')).toBe(clusterSlot('order:7'));
    expect(clusterSlot('a{}b')).not.toBe(clusterSlot(''));
    expect(clusterSlot('{}{x}')).toBe(clusterSlot('{}{x}'));
    expect(clusterSlot('ü{é}')).toBe(clusterSlot('é'));
  });
});
