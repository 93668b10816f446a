/**
 * On a gateway or microservice handler a bare placeholder that names one of its parameters reads
 * that parameter — the socket, the context: what the server set — never a field of the same name
 * a client put into its message.
 */
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  ConnectedSocket,
  MessageBody,
  SubscribeMessage,
  WebSocketGateway,
} from '@nestjs/websockets';
import { io, type Socket as ClientSocket } from 'socket.io-client';
import { currentLock, Locked, RedisLockModule } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';

interface ServerSetSocket {
  data: { userId?: string };
}

@WebSocketGateway()
class WalletGateway {
  handleConnection(client: ServerSetSocket): void {
    client.data.userId = 'alice'; // what an authentication step sets
  }

  @SubscribeMessage('wallet.pay')
  @Locked('wallet:<client.data.userId>')
  async pay(
    @ConnectedSocket() client: ServerSetSocket,
    @MessageBody() body: { amount: number },
  ): Promise<{ key: string; amount: number }> {
    void client;
    return { key: currentLock()!.key, amount: body.amount };
  }
}

describe('a gateway placeholder naming the @ConnectedSocket() parameter', () => {
  const prefix = uniquePrefix('message-key-sources');
  const redis = redisClient();
  let app: INestApplication;
  let socket: ClientSocket;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      providers: [WalletGateway],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    socket = io(await app.getUrl(), { transports: ['websocket'], forceNew: true });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('connect_error', reject);
    });
  });

  afterAll(async () => {
    socket?.disconnect();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  const send = (data: unknown): Promise<unknown> =>
    new Promise((resolve) => {
      socket.once('exception', (error: unknown) => resolve({ exception: error }));
      socket.emit('wallet.pay', data, (answer: unknown) => resolve({ answer }));
    });

  it('reads the socket the server set up, whatever the message carries', async () => {
    expect(await send({ amount: 1 })).toEqual({ answer: { key: 'wallet:alice', amount: 1 } });
    const forged = await send({ amount: 2, client: { data: { userId: 'bob' } } });
    expect(forged).toEqual({ answer: { key: 'wallet:alice', amount: 2 } });
  });
});
