import 'reflect-metadata';
import { Next, Post, Res } from '@nestjs/common';
import { Ack, MessageBody, SubscribeMessage } from '@nestjs/websockets';
import { EventEmitter } from 'node:events';
import { LockedCall } from '../locking/locked-call';
import { Locked } from './locked.decorator';
import { getResponseBinding, runHeldCall, type ResponseBinding } from './locked-response';

class Handlers {
  @Post('a')
  @Locked('a')
  async returns(): Promise<string> {
    return 'a';
  }

  @Post('b')
  @Locked('b')
  async replies(@Res() res: unknown): Promise<void> {
    void res;
  }

  @Post('c')
  @Locked('c')
  async passesThrough(@Res({ passthrough: true }) res: unknown): Promise<void> {
    void res;
  }

  @Post('d')
  @Locked('d')
  async hands(@Next() next: unknown): Promise<void> {
    void next;
  }

  @SubscribeMessage('e')
  @Locked('e')
  async acks(@MessageBody() data: unknown, @Ack() ack: unknown): Promise<void> {
    void data;
    void ack;
  }
}

const binding = (method: keyof Handlers): ResponseBinding =>
  getResponseBinding(Handlers.prototype[method]);

describe("a @Locked handler's response binding (read once, at decoration time)", () => {
  it('tells handlers that answer by themselves from the rest', () => {
    expect(binding('returns')).toEqual({ sendsResponse: false, ackIndex: undefined });
    expect(binding('replies').sendsResponse).toBe(true);
    expect(binding('hands').sendsResponse).toBe(true);
    expect(binding('passesThrough').sendsResponse).toBe(false); // Nest sends the return value
  });

  it("finds the @Ack() parameter's position", () => {
    expect(binding('acks')).toEqual({ sendsResponse: false, ackIndex: 1 });
  });
});

describe('runHeldCall', () => {
  const ackAt0: ResponseBinding = { sendsResponse: false, ackIndex: 0 };

  it('holds the call until the promise the handler returned settles', async () => {
    const call = new LockedCall();
    let settle!: () => void;
    const result = runHeldCall(call, { sendsResponse: false }, 'H.m', [], () => {
      return new Promise<void>((resolve) => (settle = resolve));
    });
    expect(call.busy).toBe(true);
    settle();
    await result;
    await call.drain();
    expect(call.busy).toBe(false);
    expect(call.open).toBe(false);
  });

  it('holds the call until the wrapped ack is called, and passes the answer on', async () => {
    const call = new LockedCall();
    const answers: unknown[] = [];
    let ack!: (answer: unknown) => void;
    runHeldCall(call, ackAt0, 'H.m', [(answer: unknown) => answers.push(answer)], ([given]) => {
      ack = given as (answer: unknown) => void;
    });
    expect(call.busy).toBe(true);
    ack('ok');
    expect(answers).toEqual(['ok']);
    await call.drain();
    expect(call.busy).toBe(false);
  });

  it('ends the ack hold when the handler throws or the client disconnects', async () => {
    const failing = new LockedCall();
    expect(() =>
      runHeldCall(failing, ackAt0, 'H.m', [() => undefined], () => {
        throw new Error('boom');
      }),
    ).toThrow('boom');
    await failing.drain();

    const client = new EventEmitter();
    const left = new LockedCall();
    left.client = client;
    runHeldCall(left, ackAt0, 'H.m', [() => undefined], () => undefined);
    expect(left.busy).toBe(true);
    client.emit('disconnect');
    await left.drain();
    expect(client.listenerCount('disconnect')).toBe(0);
  });

  it('does not run a handler reached after the lock was released', async () => {
    const call = new LockedCall();
    await call.drain();
    const run = jest.fn();
    expect(() => runHeldCall(call, { sendsResponse: false }, 'H.m', [], run)).toThrow(
      'H.m was reached after its lock was released',
    );
    expect(run).not.toHaveBeenCalled();
  });

  it("calls a lazy thenable's then() once", async () => {
    const call = new LockedCall();
    const then = jest.fn((resolve: (value: string) => void) => resolve('rows'));
    const result = runHeldCall(call, { sendsResponse: false }, 'H.m', [], () => ({ then }));
    await expect(result).resolves.toBe('rows');
    await call.drain();
    expect(then).toHaveBeenCalledTimes(1);
  });
});
