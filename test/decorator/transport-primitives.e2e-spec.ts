/**
 * Multi-key, read and semaphore locks on the transports beside HTTP — a GraphQL resolver, a TCP
 * microservice handler and a socket.io gateway — over real servers on real Redis. Each runs while
 * what it needs is free (a reader beside another reader, a permit beside another permit), and
 * while it is not, answers exactly as the mutex does on that transport: `LOCK_BUSY` on GraphQL,
 * `LockTransportError` data in the `RpcException` / `WsException`, with no key and no request
 * value in what the client receives, and without running the handler.
 */
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Controller } from '@nestjs/common';
import { Args, GraphQLModule, Mutation, Query, Resolver } from '@nestjs/graphql';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import {
  currentLock,
  Locked,
  LockService,
  type LockHandle,
  type MultiLockHandle,
} from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { gql } from './fixtures/graphql-app';
import { startTransportApp, type TransportApp } from './fixtures/transport-app';

const BUSY = 'Another request is working on the same resource. Try again shortly.';

/** How many times a handler of this file ran, by `<transport> <operation>`. */
const runs = new Map<string, number>();
const ran = (name: string): void => void runs.set(name, (runs.get(name) ?? 0) + 1);

interface TransferData {
  from: string;
  to: string;
}

/** What a handler answers: the keys it holds, in lock order. */
const heldKeys = (): string => {
  const lock = currentLock()!;
  return 'keys' in lock ? (lock as MultiLockHandle).keys.join(' + ') : lock.key;
};

@Resolver()
class PrimitivesResolver {
  @Mutation(() => String)
  @Locked(['account:<from>', 'account:<to>'])
  async transfer(@Args('from') from: string, @Args('to') to: string): Promise<string> {
    void [from, to];
    ran('graphql transfer');
    return heldKeys();
  }

  @Query(() => String)
  @Locked('report:<id>', { mode: 'read' })
  async report(@Args('id') id: string): Promise<string> {
    void id;
    ran('graphql report');
    return heldKeys();
  }

  @Mutation(() => String)
  @Locked('export:<tenant>', { permits: 2 })
  async startExport(@Args('tenant') tenant: string): Promise<string> {
    void tenant;
    ran('graphql export');
    return heldKeys();
  }
}

@Controller()
class PrimitiveMessages {
  @MessagePattern('transfer')
  @Locked(['account:<from>', 'account:<to>'])
  async transfer(@Payload() data: TransferData): Promise<string> {
    void data;
    ran('rpc transfer');
    return heldKeys();
  }

  @MessagePattern('report')
  @Locked('report:<id>', { mode: 'read' })
  async report(@Payload() data: { id: string }): Promise<string> {
    void data;
    ran('rpc report');
    return heldKeys();
  }

  @MessagePattern('export')
  @Locked('export:<tenant>', { permits: 2 })
  async startExport(@Payload() data: { tenant: string }): Promise<string> {
    void data;
    ran('rpc export');
    return heldKeys();
  }
}

@WebSocketGateway()
class PrimitivesGateway {
  @SubscribeMessage('transfer')
  @Locked(['account:<from>', 'account:<to>'])
  async transfer(@MessageBody() data: TransferData): Promise<string> {
    void data;
    ran('ws transfer');
    return heldKeys();
  }

  @SubscribeMessage('report')
  @Locked('report:<id>', { mode: 'read' })
  async report(@MessageBody() data: { id: string }): Promise<string> {
    void data;
    ran('ws report');
    return heldKeys();
  }

  @SubscribeMessage('export')
  @Locked('export:<tenant>', { permits: 2 })
  async startExport(@MessageBody() data: { tenant: string }): Promise<string> {
    void data;
    ran('ws export');
    return heldKeys();
  }
}

type Transport = 'graphql' | 'rpc' | 'ws';
type Operation = 'transfer' | 'report' | 'export';

/** One call's answer: the handler's value, or the error the client got, and the raw text. */
interface Answer {
  value?: unknown;
  error?: unknown;
  text: string;
}

const GRAPHQL: Record<Operation, [string, string]> = {
  transfer: [
    'mutation($from: String!, $to: String!) { transfer(from: $from, to: $to) }',
    'transfer',
  ],
  report: ['query($id: String!) { report(id: $id) }', 'report'],
  export: ['mutation($tenant: String!) { startExport(tenant: $tenant) }', 'startExport'],
};

async function call(
  transport: Transport,
  operation: Operation,
  data: Record<string, string>,
): Promise<Answer> {
  if (transport === 'graphql') {
    const [query, field] = GRAPHQL[operation];
    const answer = await gql(subject.app, query, data);
    return answer.errors
      ? { error: answer.errors, text: answer.text }
      : { value: answer.data?.[field], text: answer.text };
  }
  const answer = (
    transport === 'rpc'
      ? await subject.send(operation, data)
      : await subject.wsSend(operation, data)
  ) as { value?: unknown; answer?: unknown; error?: unknown; exception?: unknown };
  return {
    value: answer.value ?? answer.answer,
    error: answer.error ?? answer.exception,
    text: JSON.stringify(answer),
  };
}

/** The mutex's busy answer on each transport. */
const BUSY_ANSWER: Record<Transport, unknown> = {
  graphql: [
    expect.objectContaining({
      message: BUSY,
      extensions: { code: 'LOCK_BUSY', retryAfterMs: expect.any(Number) },
    }),
  ],
  rpc: { status: 'error', error: 'LockNotAcquiredError', message: BUSY },
  ws: { status: 'error', error: 'LockNotAcquiredError', message: BUSY },
};

const prefix = uniquePrefix('transport-primitives');
let subject: TransportApp;
let locks: LockService;

beforeAll(async () => {
  subject = await startTransportApp(
    { redis: SHARED_REDIS_URL, prefix },
    {
      imports: [
        GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, autoSchemaFile: true }),
      ],
      controllers: [PrimitiveMessages],
      providers: [PrimitivesResolver, PrimitivesGateway],
    },
  );
  locks = subject.app.get(LockService);
});

afterAll(async () => {
  await subject?.close();
  const redis = redisClient();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

/** Runs `check` while `holders` are held, and releases them after. */
async function holding(holders: Promise<LockHandle>[], check: () => Promise<void>): Promise<void> {
  const held = await Promise.all(holders);
  try {
    await check();
  } finally {
    await Promise.all(held.map((lock) => lock.release()));
  }
}

/** Nothing the client sent, and no key, in what it received. */
function expectSafe(answer: Answer, ...values: string[]): void {
  for (const value of values) expect(answer.text).not.toContain(value);
  expect(answer.text).not.toMatch(/account:|report:|export:/);
}

const TRANSPORTS: Transport[] = ['graphql', 'rpc', 'ws'];

describe.each(TRANSPORTS)('on %s', (transport) => {
  it('multi-key: holds both keys; busy while either is held elsewhere', async () => {
    const [from, to] = [`ann-${transport}@example.com`, `bob-${transport}@example.com`];
    expect(await call(transport, 'transfer', { from, to })).toMatchObject({
      value: `account:${from} + account:${to}`,
    });
    await holding([locks.acquire(`account:${to}`)], async () => {
      const runsBefore = runs.get(`${transport} transfer`);
      const answer = await call(transport, 'transfer', { from, to });
      expect(answer.error).toEqual(BUSY_ANSWER[transport]);
      expectSafe(answer, from, to);
      expect(runs.get(`${transport} transfer`)).toBe(runsBefore);
      expect(await locks.isLocked(`account:${from}`)).toBe(false); // none of the keys taken
    });
  });

  it('read: runs beside another reader; busy while a writer holds the key', async () => {
    const id = `report-${transport}-4711`;
    await holding([locks.acquire(`report:${id}`, { mode: 'read' })], async () => {
      expect(await call(transport, 'report', { id })).toMatchObject({ value: `report:${id}` });
    });
    await holding([locks.acquire(`report:${id}`)], async () => {
      const runsBefore = runs.get(`${transport} report`);
      const answer = await call(transport, 'report', { id });
      expect(answer.error).toEqual(BUSY_ANSWER[transport]);
      expectSafe(answer, id);
      expect(runs.get(`${transport} report`)).toBe(runsBefore);
    });
  });

  it('semaphore: runs while a permit is free; busy while every permit is held', async () => {
    const tenant = `tenant-${transport}-4711`;
    const permit = (): Promise<LockHandle> => locks.acquire(`export:${tenant}`, { permits: 2 });
    await holding([permit()], async () => {
      expect(await call(transport, 'export', { tenant })).toMatchObject({
        value: `export:${tenant}`,
      });
    });
    await holding([permit(), permit()], async () => {
      const runsBefore = runs.get(`${transport} export`);
      const answer = await call(transport, 'export', { tenant });
      expect(answer.error).toEqual(BUSY_ANSWER[transport]);
      expectSafe(answer, tenant);
      expect(runs.get(`${transport} export`)).toBe(runsBefore);
    });
  });
});
