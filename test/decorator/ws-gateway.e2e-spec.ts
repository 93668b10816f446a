/**
 * `@Locked` on a WebSocket gateway handler over a real socket.io connection: the key comes from the
 * message payload, one of concurrent messages for one key runs, and a refused message reaches the
 * client as an `exception` event with the failure as data — not "Internal server error".
 */
import { Injectable, ParseIntPipe, UseFilters, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import type Redis from 'ioredis';
import { io, type Socket } from 'socket.io-client';
import {
  currentLock,
  LockExceptionFilter,
  Locked,
  LockService,
  RedisLockModule,
  type LockTransportError,
} from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { Gate, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { leaseKey } from './decorator-app';

/** What callers are told of a busy lock by default: no key, no advice. */
const BUSY = 'Another request is working on the same resource. Try again shortly.';

/** The holder holds its lock until the test has seen the other bookings refused. */
const gate = new Gate();

/** A provider method the gateway calls: its lock errors reach the gateway as thrown errors. */
@Injectable()
class SeatHolds {
  @Locked('hold:<seatId>')
  async hold(seatId: string): Promise<{ held: string }> {
    await gate.opened;
    return { held: seatId };
  }
}

// Global filters (APP_FILTER) do not run for gateways in Nest: the filter goes on the gateway.
@UseFilters(LockExceptionFilter)
@WebSocketGateway()
class SeatsGateway {
  runs = 0;

  constructor(private readonly holds: SeatHolds) {}

  /** Not locked itself: the lock is taken by the service it calls. */
  @SubscribeMessage('seat.hold')
  hold(@MessageBody() data: { seatId: string }): Promise<{ held: string }> {
    return this.holds.hold(data.seatId);
  }

  @SubscribeMessage('seat.book')
  @Locked('seat:<seatId>')
  async book(@MessageBody() data: { seatId: string }): Promise<{ booked: string }> {
    this.runs++;
    await gate.opened;
    return { booked: data.seatId };
  }

  /** Keyed from the value the handler receives: `'007'` becomes `7` before the lock is taken. */
  @SubscribeMessage('row.read')
  @Locked('row:<row>')
  async row(@MessageBody('row', ParseIntPipe) row: number): Promise<{ row: number; key: string }> {
    return { row, key: currentLock()!.key };
  }

  /** The other decorator order: @Locked above @SubscribeMessage. */
  @Locked('seat:<seatId>')
  @SubscribeMessage('seat.release')
  async release(@MessageBody() data: { seatId: string }): Promise<{ released: string }> {
    return { released: data.seatId };
  }
}

describe('@Locked on a WebSocket gateway (socket.io)', () => {
  const prefix = uniquePrefix('decorator-ws');
  let app: INestApplication;
  let gateway: SeatsGateway;
  let redis: Redis;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    redis = redisClient();
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      providers: [SeatsGateway, SeatHolds],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    gateway = app.get(SeatsGateway);
  });

  afterAll(async () => {
    for (const socket of sockets) socket.disconnect();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  /** A connected client: its acknowledged answer, or the `exception` event it got instead. */
  async function connect(): Promise<(data: unknown, event?: string) => Promise<unknown>> {
    const socket = io(await app.getUrl(), { transports: ['websocket'], forceNew: true });
    sockets.push(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('connect_error', reject);
    });
    return (data, event = 'seat.book') =>
      new Promise((resolve) => {
        socket.once('exception', (error: LockTransportError) => resolve({ exception: error }));
        socket.emit(event, data, (answer: unknown) => resolve({ answer }));
      });
  }

  it('keys a message from its piped @MessageBody parameter', async () => {
    const send = await connect();
    expect(await send({ row: '007' }, 'row.read')).toEqual({ answer: { row: 7, key: 'row:7' } });
  });

  it('runs one of 4 concurrent bookings of one seat; the others get LockNotAcquiredError data', async () => {
    const clients = await Promise.all(Array.from({ length: 4 }, () => connect()));
    const bookings = clients.map((book) => book({ seatId: 'A-1' }));
    let refusals = 0;
    await new Promise<void>((allRefused) => {
      for (const booking of bookings) {
        void booking.then((result) => {
          if ('exception' in (result as object) && ++refusals === 3) allRefused();
        });
      }
    });
    gate.release();
    const results = await Promise.all(bookings);
    expect(results).toContainEqual({ answer: { booked: 'A-1' } });
    const refused = results.filter((result) => 'exception' in (result as object));
    expect(refused).toHaveLength(3);
    for (const result of refused) {
      expect((result as { exception: LockTransportError }).exception).toEqual({
        status: 'error',
        error: 'LockNotAcquiredError',
        message: BUSY,
      });
    }
    expect(gateway.runs).toBe(1);
    expect(await redis.exists(leaseKey(prefix, 'seat:A-1'))).toBe(0);
  });

  it('locks a handler decorated in the other order the same way', async () => {
    const release = await connect();
    const holder = await app.get(LockService).acquire('seat:B-2');
    try {
      expect(await release({ seatId: 'B-2' }, 'seat.release')).toMatchObject({
        exception: { status: 'error', error: 'LockNotAcquiredError', message: BUSY },
      });
    } finally {
      await holder.release();
    }
    expect(await release({ seatId: 'B-2' }, 'seat.release')).toEqual({
      answer: { released: 'B-2' },
    });
  });

  it('with @UseFilters(LockExceptionFilter), a busy @Locked service method reaches the client as data', async () => {
    const [first, second] = await Promise.all([connect(), connect()]);
    const holding = first({ seatId: 'C-3' }, 'seat.hold');
    await waitFor(async () => (await redis.exists(leaseKey(prefix, 'hold:C-3'))) === 1);
    expect(await second({ seatId: 'C-3' }, 'seat.hold')).toEqual({
      exception: { status: 'error', error: 'LockNotAcquiredError', message: BUSY },
    });
    gate.release();
    expect(await holding).toEqual({ answer: { held: 'C-3' } });
  });

  it('answers a payload without the key field with LockKeyError data', async () => {
    const book = await connect();
    expect(await book({ row: 3 })).toEqual({
      exception: {
        status: 'error',
        error: 'LockKeyError',
        message: 'The request is missing a value this operation needs, or a value is invalid.',
      },
    });
  });
});
