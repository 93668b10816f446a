import { choosePubSubMode, publishCommand } from './pubsub-mode';

describe('choosePubSubMode', () => {
  it('chooses sharded pub/sub only when every node has SPUBLISH', () => {
    expect(
      choosePubSubMode([
        { node: 'a:1', sharded: true },
        { node: 'b:2', sharded: true },
      ]),
    ).toEqual({ mode: 'sharded' });
  });

  it('falls back to classic pub/sub when a node does not answer (it might lack SPUBLISH)', () => {
    const silent = { node: 'c:3', unreachable: true as const };
    expect(choosePubSubMode([{ node: 'a:1', sharded: true }, silent])).toEqual({
      mode: 'classic',
      reason: silent,
    });
  });

  it('falls back to classic pub/sub for the whole Cluster when one node lacks it (an upgrade)', () => {
    const lacking = { node: 'b:2', sharded: false };
    const silent = { node: 'c:3', unreachable: true as const };
    expect(choosePubSubMode([{ node: 'a:1', sharded: true }, silent, lacking])).toEqual({
      mode: 'classic',
      reason: lacking,
    });
  });

  it('falls back to classic pub/sub when a node refuses to say (an ACL without +command)', () => {
    const refused = { node: 'b:2', refused: 'NOPERM' };
    expect(choosePubSubMode([{ node: 'a:1', sharded: true }, refused])).toEqual({
      mode: 'classic',
      reason: refused,
    });
  });

  it('decides nothing when no node answered, so the caller asks again later', () => {
    expect(() => choosePubSubMode([{ node: 'a:1', unreachable: true }])).toThrow(/No Redis/);
    expect(() => choosePubSubMode([])).toThrow(/No Redis/);
  });

  it('publishes with the command of the mode', () => {
    expect(publishCommand('sharded')).toBe('SPUBLISH');
    expect(publishCommand('classic')).toBe('PUBLISH');
  });
});
