import { ReplyError } from 'ioredis';
import { ErrorReply, SimpleError } from 'redis';
import { finalReplyErrorCode, isReplyError, refusedUnrun } from './reply-error';

describe('isReplyError', () => {
  it("knows ioredis' ReplyError and node-redis' ErrorReply and its subclasses", () => {
    expect(isReplyError(new ReplyError('WRONGTYPE x'))).toBe(true);
    expect(isReplyError(new ErrorReply('WRONGTYPE x'))).toBe(true);
    expect(isReplyError(new SimpleError('NOSCRIPT x'))).toBe(true);
    expect(finalReplyErrorCode(new SimpleError('WRONGTYPE x'))).toBe('WRONGTYPE');
    expect(refusedUnrun(new SimpleError('TRYAGAIN x'))).toBe(true);
  });

  it('is false for a dropped connection or a timeout, whatever its message', () => {
    expect(isReplyError(new Error('WRONGTYPE x'))).toBe(false);
    expect(isReplyError('WRONGTYPE x')).toBe(false);
  });
});

describe('finalReplyErrorCode', () => {
  it.each([
    ['WRONGTYPE Operation against a key holding the wrong kind of value', 'WRONGTYPE'],
    ["NOPERM User app has no permissions to run the 'evalsha' command", 'NOPERM'],
    ["OOM command not allowed when used memory > 'maxmemory'.", 'OOM'],
    ["ERR unknown command 'spublish'", 'ERR'],
    [
      "ERR The user executing the script can't run this command or subcommand script: c6ad17, on @user_script:6.",
      'NOPERM',
    ],
    // The same refusal from Redis 6.2, wrapped as a script error.
    [
      "ERR Error running script (call to f_f651f1192b5344137e6bc34a49aa0948b47c6d2c): @user_script:6: @user_script: 6: The user executing the script can't run this command or subcommand",
      'NOPERM',
    ],
  ])('calls "%s" final (%s)', (message, code) => {
    expect(finalReplyErrorCode(new ReplyError(message))).toBe(code);
  });

  it.each([
    "READONLY You can't write against a read only replica.",
    'LOADING Redis is loading the dataset in memory',
    'MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to no',
    'CLUSTERDOWN The cluster is down',
    'TRYAGAIN Multiple keys request during rehashing of slot',
    'BUSY Redis is busy running a script.',
    // A primary whose replicas lag past min-replicas-max-lag (cut off from them, say).
    'NOREPLICAS Not enough good replicas to write. script: 038ac45f41847003d5fc6bba4c7575ca8a971496, on @user_script:2.',
  ])('leaves the transient "%s" to the retry loop', (message) => {
    expect(finalReplyErrorCode(new ReplyError(message))).toBeUndefined();
  });

  it.each([
    [
      'ERR Error running script (call to f_8ea4a1b2): @user_script:1: WRONGTYPE Operation against a key holding the wrong kind of value',
      'WRONGTYPE',
    ],
    [
      'ERR Error running script (call to f_8ea4a1b2): @user_script:2: user_script:2: Script attempted to access a non local key',
      'ERR',
    ],
  ])('reads the code a Redis < 7 script error carries: "%s" → %s', (message, code) => {
    expect(finalReplyErrorCode(new ReplyError(message))).toBe(code);
  });

  it.each([
    "ERR Error running script (call to f_8ea4a1b2): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica.",
    'ERR Error running script (call to f_8ea4a1b2): @user_script:2: @user_script: 2: -NOREPLICAS Not enough good replicas to write.',
  ])(
    'leaves a transient error raised inside a script (Redis < 7) to the retry loop: "%s"',
    (wrapped) => {
      expect(finalReplyErrorCode(new ReplyError(wrapped))).toBeUndefined();
    },
  );

  it('leaves errors that are not replies (timeouts, dropped connections) alone', () => {
    expect(finalReplyErrorCode(new Error('Connection is closed.'))).toBeUndefined();
    expect(finalReplyErrorCode('WRONGTYPE')).toBeUndefined();
  });
});

describe('refusedUnrun', () => {
  it.each([
    new ReplyError('TRYAGAIN Multiple keys request during rehashing of slot'),
    new ReplyError('CLUSTERDOWN The cluster is down'),
    new Error('Redis release failed', {
      cause: new Error('Too many Cluster redirections. Last error: ReplyError: MOVED 7562 h:1'),
    }),
    new Error(
      'Too many Cluster redirections. Last error: ReplyError: NOSCRIPT No matching script. Please use EVAL.',
    ),
  ])('knows "%s" was refused before it ran', (error) => {
    expect(refusedUnrun(error)).toBe(true);
  });

  it.each([
    new ReplyError("READONLY You can't write against a read only replica."),
    new Error('Redis release did not answer within 2000 ms'),
    new Error('Too many Cluster redirections. Last error: Error: Connection is closed.'),
    new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value'),
  ])('cannot tell whether "%s" ran', (error) => {
    expect(refusedUnrun(error)).toBe(false);
  });
});
