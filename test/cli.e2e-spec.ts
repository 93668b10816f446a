/**
 * The `nestjs-redis-lock` command end to end: spawned as a process against the shared Redis, its
 * output and exit codes for ls, show and release --force, its refusals, and a holder that sees its
 * lock removed at its next renewal.
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { Logger } from '@nestjs/common';
import { onSharedRedis } from './support/lock-services';
import { SHARED_REDIS_URL } from './support/shared-redis';
import { waitFor } from './support/time';

const root = resolve(__dirname, '..');

/** Runs the command from its TypeScript source; resolves its exit code and output. */
function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const argv = ['-r', './tools/ts-register.js', 'lib/cli/main.ts', ...args];
  return new Promise((done) => {
    execFile(
      process.execPath,
      argv,
      { cwd: root, env: { ...process.env, REDIS_URL: SHARED_REDIS_URL, ...env }, timeout: 20_000 },
      (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: unknown }).code ?? 1) : 0;
        done({ code, stdout, stderr });
      },
    );
  });
}

const { prefix, redis, services } = onSharedRedis('cli');

it('lists, shows and force-releases, and the holder loses its lock at its next renewal', async () => {
  const app = services.create({ instanceId: 'billing-7', ttl: 1_500 });
  const lock = await app.acquire('invoice:42');
  const other = await app.acquire('invoice:43');

  const ls = await cli(['ls', '--prefix', prefix]);
  expect(ls).toMatchObject({ code: 0, stderr: '' });
  expect(ls.stdout).toMatch(/^KEY\s+KIND\s+HOLDERS\s+TTL_MS\s+FENCE\s+HOLDER\s+SINCE\s+WAITERS$/m);
  expect(ls.stdout).toMatch(
    new RegExp(`^invoice:42\\s+exclusive\\s+1\\s+\\d+\\s+${lock.fence}\\s+billing-7\\s`, 'm'),
  );
  expect(ls.stdout).toMatch(/^invoice:43\s/m);

  const lsJson = await cli(['ls', '--prefix', prefix, '--json']);
  const listed = JSON.parse(lsJson.stdout) as { key: string }[];
  expect(listed.map((entry) => entry.key).sort()).toEqual(['invoice:42', 'invoice:43']);

  const show = await cli(['show', 'invoice:42', '--prefix', prefix]);
  expect(show.code).toBe(0);
  expect(show.stdout).toContain(`fence:   ${lock.fence}`);
  expect(show.stdout).toMatch(/holder: {2}billing-7 since \d{4}-\d\d-\d\dT/);

  const showJson = await cli(['show', 'invoice:42', '--prefix', prefix, '--json']);
  expect(JSON.parse(showJson.stdout)).toMatchObject({
    key: 'invoice:42',
    held: true,
    fence: lock.fence,
    holder: { instanceId: 'billing-7' },
  });

  const refused = await cli(['release', 'invoice:42', '--prefix', prefix]);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toContain('without --force');
  expect(await app.isLocked('invoice:42')).toBe(true);

  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  try {
    const released = await cli(['release', 'invoice:42', '--force', '--prefix', prefix]);
    expect(released).toMatchObject({ code: 0, stderr: '' });
    expect(released.stdout.trim()).toMatch(
      new RegExp(`^Released invoice:42: holder billing-7 since \\S+, fence ${lock.fence}\\.$`),
    );
    await waitFor(() => lock.signal.aborted, 3_000, 10); // renewal every 500 ms
  } finally {
    warn.mockRestore();
  }

  const again = await cli(['release', 'invoice:42', '--force', '--prefix', prefix]);
  expect(again.code).toBe(1);
  expect(again.stdout).toContain('not held');
  const gone = await cli(['show', 'invoice:42', '--prefix', prefix]);
  expect(gone).toMatchObject({ code: 1, stdout: 'invoice:42: not held\n' });
  await other.release();
  await lock.release().catch(() => undefined);
});

it('lists and shows read locks and semaphores with their kind, holder count and holders, and releases them', async () => {
  const app = services.create({ instanceId: 'reporting-3', ttl: 5_000 });
  const readers = [
    await app.acquire('catalog', { mode: 'read' }),
    await app.acquire('catalog', { mode: 'read' }),
  ];
  const permits = await Promise.all([1, 2, 3].map(() => app.acquire('exports', { permits: 4 })));

  const ls = await cli(['ls', '--prefix', prefix]);
  expect(ls).toMatchObject({ code: 0, stderr: '' });
  expect(ls.stdout).toMatch(/^catalog\s+read\s+2\s+\d+\s+\d+\s+reporting-3\s/m);
  expect(ls.stdout).toMatch(/^exports\s+semaphore\s+3\/4\s+\d+\s+\d+\s+reporting-3\s/m);

  const showRead = await cli(['show', 'catalog', '--prefix', prefix]);
  expect(showRead.code).toBe(0);
  expect(showRead.stdout).toContain('kind:    read');
  expect(showRead.stdout).toMatch(/^readers: 2 \(writers waiting: 0\)$/m);
  expect(showRead.stdout.match(/^ {2}\d\. reporting-3 since \S+ \(ttl \d+ ms\)$/gm)).toHaveLength(
    2,
  );

  const showSemaphore = await cli(['show', 'exports', '--prefix', prefix]);
  expect(showSemaphore.stdout).toContain('kind:    semaphore');
  expect(showSemaphore.stdout).toMatch(/^permits: 3 of 4 held$/m);
  expect(showSemaphore.stdout.match(/^ {2}\d\. reporting-3 since /gm)).toHaveLength(3);
  const json = JSON.parse((await cli(['show', 'exports', '--prefix', prefix, '--json'])).stdout);
  expect(json).toMatchObject({ kind: 'semaphore', semaphore: { permits: 4, count: 3 } });

  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  try {
    const released = await cli(['release', 'exports', '--force', '--prefix', prefix]);
    expect(released).toMatchObject({ code: 0, stderr: '' });
    expect(released.stdout.trim()).toMatch(
      /^Released exports: semaphore, 3 holder\(s\) \(reporting-3, reporting-3, reporting-3\), fence \d+\.$/,
    );
    const releasedReaders = await cli(['release', 'catalog', '--force', '--prefix', prefix]);
    expect(releasedReaders.stdout).toMatch(/^Released catalog: read, 2 holder\(s\)/);
    await waitFor(() => [...readers, ...permits].every((held) => held.signal.aborted), 5_000, 10);
  } finally {
    warn.mockRestore();
  }
  expect((await cli(['ls', '--prefix', prefix])).stdout.trim()).toBe('No locks held.');
});

it('release --force removes the permits on a key, their limit and holder records with them', async () => {
  const app = services.create({ instanceId: 'report-1', ttl: 5_000 });
  const permits = await Promise.all([1, 2, 3].map(() => app.acquire('report', { permits: 5 })));
  // Kinds on one name exclude each other: the mutex on the key is busy while the permits hold it.
  expect(await app.tryAcquire('report')).toBeNull();
  // One permit's grant wrote no record (as by an older version): counted, not named.
  await redis.hdel(`${prefix}{report}:permits:holders`, permits[0]!.token);
  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  try {
    const released = await cli(['release', 'report', '--force', '--prefix', prefix]);
    expect(released).toMatchObject({ code: 0, stderr: '' });
    expect(released.stdout.trim().split('\n')).toEqual([
      `Released report: semaphore, 3 holder(s) (report-1, report-1, 1 without a record), fence ${permits[2]!.fence}.`,
    ]);
    const companions = ['limit', 'holders'].map((name) => `${prefix}{report}:permits:${name}`);
    expect(await redis.exists(`${prefix}{report}`, ...companions)).toBe(0);
    const json = JSON.parse(
      (await cli(['release', 'report', '--force', '--prefix', prefix, '--json'])).stdout,
    );
    expect(json).toEqual({ key: 'report', removed: null }); // control: gone, nothing to report
    await waitFor(() => permits.every((held) => held.signal.aborted), 5_000, 10);
  } finally {
    warn.mockRestore();
  }
});

it('show reads a key its permits hold as a semaphore, which a reader cannot join', async () => {
  const app = services.create({ instanceId: 'report-2', ttl: 5_000 });
  const permits = await Promise.all([1, 2, 3].map(() => app.acquire('summary', { permits: 4 })));
  expect(await app.tryAcquire('summary', { mode: 'read' })).toBeNull();
  const show = await cli(['show', 'summary', '--prefix', prefix]);
  expect(show).toMatchObject({ code: 0, stderr: '' });
  expect(show.stdout).not.toMatch(/^kinds:/m); // one kind holds a name
  expect(show.stdout).toContain('kind:    semaphore');
  expect(show.stdout).toMatch(/^permits: 3 of 4 held$/m);
  expect(show.stdout).toContain(`fence:   ${permits[2]!.fence}`);
  const json = JSON.parse((await cli(['show', 'summary', '--prefix', prefix, '--json'])).stdout);
  expect(json).toMatchObject({ kind: 'semaphore', semaphore: { permits: 4, count: 3 } });
  expect(json.others).toBeUndefined();
  await Promise.all(permits.map((held) => held.release()));
});

it('answers usage errors with 2, an unreachable Redis with 3, and --help with 0', async () => {
  const [unknown, missingKey, badOption, help, unreachable] = await Promise.all([
    cli(['frobnicate']),
    cli(['show']),
    cli(['ls', '--colour']),
    cli(['--help']),
    cli(['show', 'x'], { REDIS_URL: 'redis://127.0.0.1:1' }),
  ]);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain('Unknown command "frobnicate"');
  expect(missingKey.code).toBe(2);
  expect(missingKey.stderr).toContain('show needs a <key>');
  expect(badOption.code).toBe(2);
  expect(help).toMatchObject({ code: 0, stderr: '' });
  expect(help.stdout).toContain('Usage: nestjs-redis-lock');
  expect(unreachable.code).toBe(3);
  expect(unreachable.stderr).toContain('127.0.0.1:1');
});

it('answers an unknown option with one line: the option, a suggestion and where help is', async () => {
  const [typo, unknown, missingValue] = await Promise.all([
    cli(['ls', '--prefx', 'orders:']),
    cli(['ls', '--colour']),
    cli(['ls', '--prefix']),
  ]);
  expect(typo.code).toBe(2);
  expect(typo.stderr).toBe(
    'nestjs-redis-lock: unknown option --prefx; did you mean --prefix? ' +
      'Run "nestjs-redis-lock --help" for usage.\n',
  );
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toBe(
    'nestjs-redis-lock: unknown option --colour. Run "nestjs-redis-lock --help" for usage.\n',
  );
  expect(missingValue.code).toBe(2);
  expect(missingValue.stderr).toBe(
    'nestjs-redis-lock: option --prefix needs a value. Run "nestjs-redis-lock --help" for usage.\n',
  );
});
