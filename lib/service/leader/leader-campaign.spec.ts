import { MemoryLockBackend } from '../../backends/memory.backend';
import { REDLOCK, assertServesKind } from '../../backends/store-capabilities';
import { LeadershipRevokedError, NotLeaderError, RedisLockConfigError } from '../../errors/errors';
import type { LeaderRevokedReason } from '../../errors/errors';
import { LEADER } from '../../keys/lease-kind';
import { LockService } from '../lock.service';
import type { LeaderHandle } from './leader-handle';

/** Polls `check` until it holds (bounded): campaigns run on real timers and a memory store. */
async function until(check: () => boolean, ms = 2_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('leader election on the memory store', () => {
  let backend: MemoryLockBackend;
  let services: LockService[];

  beforeEach(() => {
    backend = new MemoryLockBackend();
    services = [0, 1, 2].map(
      (i) => new LockService({ instanceId: `replica-${i}`, shutdownGrace: 1_000 }, { backend }),
    );
  });

  afterEach(async () => {
    await Promise.all(services.map((locks) => locks.close()));
    await backend.close();
  });

  const leaders = (handles: LeaderHandle[]) => handles.filter((handle) => handle.isLeader);

  it('elects exactly one of three replicas, and a resignation hands over with a higher term', async () => {
    const handles = services.map((locks) => locks.lead('scheduler', { lease: 1_000 }));
    await until(() => leaders(handles).length === 1);
    const first = leaders(handles)[0]!;
    const firstTerm = first.term;
    expect(firstTerm).toBeGreaterThan(0);
    await first.resign();
    expect(first.isLeader).toBe(false);
    expect(first.signal.reason).toBeInstanceOf(LeadershipRevokedError);
    expect((first.signal.reason as LeadershipRevokedError).reason).toBe('resigned');
    await until(() => leaders(handles).length === 1, 500); // the release message, not the lease
    const second = leaders(handles)[0]!;
    expect(second).not.toBe(first);
    expect(second.term).toBeGreaterThan(firstTerm);
  });

  it('runs work on the leader only, and skips it on followers', async () => {
    const handles = services.map((locks) => locks.lead('outbox', { lease: 1_000 }));
    await until(() => leaders(handles).length === 1);
    const ran = await Promise.all(handles.map((handle) => handle.run(({ term }) => term)));
    expect(ran.filter((value) => value !== undefined)).toEqual([leaders(handles)[0]!.term]);
  });

  it('ends a term at its termLimit, calls onRevoked, and campaigns again', async () => {
    const reasons: LeaderRevokedReason[] = [];
    const elected: number[] = [];
    const only = services[0]!.lead('warmer', {
      lease: 1_000,
      termLimit: 150,
      rejoinDelay: 10,
      onElected: ({ term }) => void elected.push(term),
      onRevoked: (reason) => void reasons.push(reason),
    });
    await until(() => elected.length >= 2);
    expect(reasons[0]).toBe('max-hold');
    expect(elected[1]).toBeGreaterThan(elected[0]!);
    await only.resign();
  });

  it('reports elected and revoked events, and shows the leader to inspection', async () => {
    const events: string[] = [];
    services[0]!.on('elected', ({ role, term }) => void events.push(`elected ${role} ${term}`));
    services[0]!.on('revoked', ({ role, reason }) => void events.push(`revoked ${role} ${reason}`));
    const handle = services[0]!.lead('reports', { lease: 1_000 });
    await until(() => handle.isLeader);
    const info = await services[1]!.inspectLeader('reports');
    expect(info).toMatchObject({ role: 'reports', led: true, term: handle.term });
    expect(info.leader?.instanceId).toBe('replica-0');
    expect(info.leaseLeftMs).toBeGreaterThan(0);
    await handle.resign();
    expect(events).toEqual([`elected reports ${handle.term}`, 'revoked reports resigned']);
    expect((await services[1]!.inspectLeader('reports')).led).toBe(false);
  });

  it('gives a not-yet-elected handle an aborted signal, and refuses a second campaign', () => {
    const handle = services[0]!.lead('solo', { lease: 1_000 });
    if (!handle.isLeader) expect(handle.signal.reason).toBeInstanceOf(NotLeaderError);
    expect(() => services[0]!.lead('solo')).toThrow(RedisLockConfigError);
    expect(() => services[0]!.lead('')).toThrow(RedisLockConfigError);
    expect(() => services[0]!.lead('x', { lease: -1 })).toThrow(RedisLockConfigError);
  });

  it('elects and hands over in fair mode too, followers queued as a mutex waiters are', async () => {
    const fair = [0, 1].map(
      (i) => new LockService({ instanceId: `fair-${i}`, fair: true }, { backend }),
    );
    services.push(...fair);
    const handles = fair.map((locks) => locks.lead('queued', { lease: 1_000 }));
    await until(() => leaders(handles).length === 1);
    const first = leaders(handles)[0]!;
    const term = first.term;
    await first.resign();
    await until(() => leaders(handles).length === 1, 500);
    expect(leaders(handles)[0]!.term).toBeGreaterThan(term);
  });

  it('refuses leadership on Redlock through the store capabilities, before connecting', () => {
    expect(() => assertServesKind(REDLOCK, LEADER)).toThrow(/Leader election needs one Redis/);
    const nodes = ['redis://127.0.0.1:1', 'redis://127.0.0.1:2', 'redis://127.0.0.1:3'];
    expect(() => new LockService({ redlock: { nodes }, leaders: ['scheduler'] })).toThrow(
      /Leader election needs one Redis .* not redlock/,
    );
  });

  it('resigns at shutdown once the running work has settled', async () => {
    const handles = services.map((locks) => locks.lead('drain', { lease: 5_000 }));
    await until(() => leaders(handles).length === 1);
    const leader = leaders(handles)[0]!;
    const index = handles.indexOf(leader);
    let finish!: () => void;
    const work = leader.run(() => new Promise<void>((resolve) => (finish = resolve)));
    const closing = services[index]!.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(leader.isLeader).toBe(true); // still leading: its work runs
    expect(await leader.run(() => 'new work')).toBeUndefined(); // no new work once stopping
    finish();
    await work;
    await closing;
    expect((leader.signal.reason as LeadershipRevokedError).reason).toBe('resigned');
    await until(() => leaders(handles).length === 1, 500);
  });
});
