/**
 * `@Locked` gateway handlers that acknowledge by hand (`@Ack()`), over a real socket.io
 * connection: the key is held until the ack is sent (or the client left), and a call skipped as
 * busy (`onBusy: 'skip'`) still gets an explicit ack, `{ status: 'skipped' }`.
 */
import { type INestApplication, UseInterceptors } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Ack, MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import type Redis from 'ioredis';
import { io, type Socket } from 'socket.io-client';
import { Locked, LockService, RedisLockModule } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { ConcurrentRuns, ReleaseOnReturnInterceptor } from './concurrent-runs';

const runs = new ConcurrentRuns();

type AckFn = (answer: unknown) => void;

/** Acknowledges once the test opens the key's gate: the handler itself returns at once. */
function ackLater(key: string, ack: AckFn): void {
  runs.enter(key);
  void runs.gate(key).then(() => {
    runs.leave(key);
    ack({ done: key });
  });
}

@WebSocketGateway()
class AckGateway {
  @SubscribeMessage('seat.book')
  @Locked('seat:<seatId>')
  async book(@MessageBody() data: { seatId: string }, @Ack() ack: AckFn): Promise<void> {
    ackLater(`seat:${data.seatId}`, ack);
  }

  @SubscribeMessage('control.book')
  @UseInterceptors(ReleaseOnReturnInterceptor)
  controlBook(@MessageBody() data: { seatId: string }, @Ack() ack: AckFn): void {
    ackLater(`control:${data.seatId}`, ack);
  }

  @SubscribeMessage('skip.manual')
  @Locked('skip-manual:<seatId>', { onBusy: 'skip' })
  async skipManual(@MessageBody() data: { seatId: string }, @Ack() ack: AckFn): Promise<void> {
    ack({ ran: data.seatId });
  }

  @SubscribeMessage('skip.returned')
  @Locked('skip-returned:<seatId>', { onBusy: 'skip' })
  async skipReturned(@MessageBody() data: { seatId: string }): Promise<{ ran: string }> {
    return { ran: data.seatId };
  }
}

describe('@Locked gateway handlers with acknowledgements (socket.io)', () => {
  const prefix = uniquePrefix('ws-ack-lifetime');
  let app: INestApplication;
  let locks: LockService;
  let redis: Redis;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    redis = redisClient();
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      providers: [AckGateway, ReleaseOnReturnInterceptor],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    locks = app.get(LockService);
  });

  afterEach(() => runs.openAll());

  afterAll(async () => {
    runs.openAll();
    for (const socket of sockets) socket.disconnect();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  async function connect(): Promise<Socket> {
    const socket = io(await app.getUrl(), { transports: ['websocket'], forceNew: true });
    sockets.push(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('connect_error', reject);
    });
    return socket;
  }

  /** Emits and resolves with the ack, the `exception` event, or 'no answer' after 3 s. */
  function send(socket: Socket, event: string, data: unknown): Promise<unknown> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve('no answer'), 3_000);
      const onException = (error: unknown): void => {
        clearTimeout(timer);
        resolve({ exception: error });
      };
      socket.once('exception', onException);
      socket.emit(event, data, (answer: unknown) => {
        clearTimeout(timer);
        socket.off('exception', onException);
        resolve({ answer });
      });
    });
  }

  /** A second message for a key whose first run still goes on: its answer, or 'ran' (overlap). */
  const secondCall = async (key: string, event: string, seatId: string) => {
    const socket = await connect();
    return runs.answeredOrRan(key, () => send(socket, event, { seatId }));
  };

  it('CONTROL: a lock released on return lets a second message run beside the first', async () => {
    const key = 'control:c-1';
    const first = send(await connect(), 'control.book', { seatId: 'c-1' });
    await waitFor(() => runs.started(key) === 1, 3_000, 5);
    expect(await secondCall(key, 'control.book', 'c-1')).toBe('ran');
    expect(runs.maxConcurrent(key)).toBe(2);
    runs.open(key);
    await first;
  });

  it('holds the key until the handler sends its ack, then releases it', async () => {
    const key = 'seat:a-1';
    const first = send(await connect(), 'seat.book', { seatId: 'a-1' });
    await waitFor(() => runs.started(key) === 1, 3_000, 5);
    expect(await secondCall(key, 'seat.book', 'a-1')).toMatchObject({
      exception: { error: 'LockNotAcquiredError' },
    });

    runs.open(key);
    expect(await first).toEqual({ answer: { done: key } });
    await waitFor(async () => !(await locks.isLocked(key)), 2_000, 5);
    expect(runs.maxConcurrent(key)).toBe(1);
  });

  it('releases the key when the client disconnects before the ack was sent', async () => {
    const key = 'seat:a-2';
    const socket = await connect();
    socket.emit('seat.book', { seatId: 'a-2' }, () => undefined);
    await waitFor(() => runs.started(key) === 1, 3_000, 5);
    expect(await locks.isLocked(key)).toBe(true);
    socket.disconnect();
    await waitFor(async () => !(await locks.isLocked(key)), 2_000, 5);
  });

  it.each([
    ['with @Ack()', 'skip.manual', 'skip-manual'],
    ['acking its return value', 'skip.returned', 'skip-returned'],
  ])('acks a call skipped as busy %s with { status: "skipped" }', async (_how, event, name) => {
    const socket = await connect();
    const holder = await locks.acquire(`${name}:s-1`);
    try {
      expect(await send(socket, event, { seatId: 's-1' })).toEqual({
        answer: { status: 'skipped' },
      });
    } finally {
      await holder.release();
    }
    expect(await send(socket, event, { seatId: 's-1' })).toEqual({ answer: { ran: 's-1' } });
  });
});
