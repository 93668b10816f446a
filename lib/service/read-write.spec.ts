import { LockService } from './lock.service';

describe('LockService with redlock', () => {
  it('refuses a read lock at the call, before any command', async () => {
    const nodes = ['redis://127.0.0.1:1', 'redis://127.0.0.1:2', 'redis://127.0.0.1:3'];
    const locks = new LockService({ redlock: { nodes }, startupCheck: 'off' });
    try {
      await expect(locks.acquire('doc', { mode: 'read' })).rejects.toThrow(/redlock/);
    } finally {
      await locks.close();
    }
  });
});
