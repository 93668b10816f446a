import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy between a Redis client and a private `redis-server`, for the fault suites: it can
 * stall traffic (a partition), drop replies (a one-way partition, or a connection that dies after
 * the server executed a command), add latency, and cut connections.
 *
 * It reads the RESP framing in both directions, so it forwards whole commands and whole replies
 * and knows which reply answers which command. A byte stream cannot lose bytes and stay in sync,
 * so every fault that discards data also ends the connections it touched (at once, or when the
 * partition heals) — as TCP would — instead of handing the client someone else's reply.
 */
export interface TcpProxy {
  readonly port: number;
  /** `redis://127.0.0.1:<port>`: give this to the client instead of the server's URL. */
  readonly url: string;
  /** Client connections open through the proxy right now. */
  readonly connectionCount: number;
  /**
   * A partition: nothing flows either way, new connections are accepted and left hanging.
   * `heal()` delivers what was held back, in order, as TCP retransmission would.
   */
  blackhole(): void;
  /**
   * A one-way partition: commands reach the server and run; their replies are discarded.
   * `heal()` then ends the connections that lost replies (their client is out of sync).
   */
  dropReplies(): void;
  /** Ends the current fault: delivers held-back traffic, ends connections that lost data. */
  heal(): void;
  /** Delays every command and every reply by `ms` (0 turns it off). */
  setLatency(ms: number): void;
  /**
   * The server runs the next command matching `match`, but its reply never reaches the client.
   * Then `'reset'` ends that connection at once (the client sees it close with the command
   * unanswered); `'stall'` leaves it open and silent until `heal()` / `resetConnections()`.
   * Resolves with the command's arguments once its reply was dropped.
   */
  dropReplyTo(match: CommandMatcher, then: 'reset' | 'stall'): Promise<string[]>;
  /**
   * Runs `hook` when the next command matching `match` passes: `'request'` just before it is
   * forwarded to the server, `'reply'` just before its reply is forwarded to the client.
   * Resolves with the command's arguments after the hook ran.
   */
  onCommand(match: CommandMatcher, at: 'request' | 'reply', hook: () => void): Promise<string[]>;
  /** Every command seen so far (arguments as strings), oldest first, for assertions. */
  readonly commands: readonly string[][];
  /** Ends every open connection at once (data in flight is lost). */
  resetConnections(): void;
  /**
   * Sends connections opened from now on to 127.0.0.1:`port` (open ones stay where they are):
   * with `resetConnections()`, a client's reconnect lands on another server, as after a failover.
   */
  retarget(port: number): void;
  /** Stops listening and ends every connection. */
  close(): Promise<void>;
}

/** Picks commands by their arguments, e.g. `(args) => args[0] === 'evalsha'` (lower-cased name). */
export type CommandMatcher = (args: string[]) => boolean;

interface Rule {
  readonly match: CommandMatcher;
  readonly at: 'request' | 'reply';
  readonly action: (connection: Connection, args: string[]) => 'drop' | 'pass';
  readonly done: (args: string[]) => void;
}

const proxies = new Set<TcpProxy>();

/** Starts a proxy on a free 127.0.0.1 port in front of 127.0.0.1:`targetPort`. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  const proxy = new Proxy(targetPort);
  await proxy.listen();
  proxies.add(proxy);
  return proxy;
}

/** Closes every proxy this test file started (for `afterAll`). */
export async function closeAllProxies(): Promise<void> {
  const all = [...proxies];
  proxies.clear();
  await Promise.all(all.map((proxy) => proxy.close()));
}

type Mode = 'flow' | 'blackhole' | 'drop-replies';

class Proxy implements TcpProxy {
  private readonly server: Server;
  private readonly connections = new Set<Connection>();
  private rules: Rule[] = [];
  mode: Mode = 'flow';
  latency = 0;
  readonly commands: string[][] = [];

  constructor(private targetPort: number) {
    this.server = createServer((client) => this.accept(client));
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get connectionCount(): number {
    return this.connections.size;
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
  }

  blackhole(): void {
    this.mode = 'blackhole';
  }

  dropReplies(): void {
    this.mode = 'drop-replies';
  }

  heal(): void {
    this.mode = 'flow';
    for (const connection of [...this.connections]) {
      if (connection.lostData) connection.destroy();
      else connection.flush();
    }
  }

  setLatency(ms: number): void {
    this.latency = ms;
  }

  dropReplyTo(match: CommandMatcher, then: 'reset' | 'stall'): Promise<string[]> {
    return new Promise((resolve) => {
      this.rules.push({
        match,
        at: 'reply',
        action: (connection) => {
          // Nothing after the dropped reply may reach the client: it would answer the wrong command.
          connection.lostData = true;
          connection.stalled = true;
          if (then === 'reset') connection.destroy();
          return 'drop';
        },
        done: resolve,
      });
    });
  }

  onCommand(match: CommandMatcher, at: 'request' | 'reply', hook: () => void): Promise<string[]> {
    return new Promise((resolve) => {
      this.rules.push({
        match,
        at,
        action: () => {
          hook();
          return 'pass';
        },
        done: resolve,
      });
    });
  }

  /**
   * The pending rules of this kind that match this command, as one (removed: each rule fires
   * once). One command can match several: a batched renewal names many locks.
   */
  takeRule(args: string[], at: 'request' | 'reply'): Rule | undefined {
    const taken = this.rules.filter((rule) => rule.at === at && rule.match(args));
    if (taken.length <= 1) {
      if (taken.length === 1) this.rules.splice(this.rules.indexOf(taken[0]!), 1);
      return taken[0];
    }
    this.rules = this.rules.filter((rule) => !taken.includes(rule));
    return {
      match: taken[0]!.match,
      at,
      action: (connection, matched) =>
        taken.map((rule) => rule.action(connection, matched)).includes('drop') ? 'drop' : 'pass',
      done: (matched) => taken.forEach((rule) => rule.done(matched)),
    };
  }

  resetConnections(): void {
    for (const connection of [...this.connections]) connection.destroy();
  }

  retarget(port: number): void {
    this.targetPort = port;
  }

  async close(): Promise<void> {
    proxies.delete(this);
    this.resetConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  forget(connection: Connection): void {
    this.connections.delete(connection);
  }

  private accept(client: Socket): void {
    const upstream = connect(this.targetPort, '127.0.0.1');
    this.connections.add(new Connection(this, client, upstream));
  }
}

/** One message (a command or a reply) waiting to be forwarded. */
interface Pending {
  readonly bytes: Buffer;
  readonly at: number;
  /** The rule to apply as this message passes. */
  readonly rule?: Rule;
  /** For a command: the rule to apply to its reply. */
  readonly replyRule?: Rule;
  readonly args?: string[];
}

/** One client connection and its upstream connection to the server. */
class Connection {
  /** Replies were discarded: the client can no longer match replies to commands. */
  lostData = false;
  /** Nothing flows on this connection any more (after a dropped reply with `'stall'`). */
  stalled = false;
  private readonly toServer = new Direction();
  private readonly toClient = new Direction();
  /** Commands forwarded whose reply has not come back yet, oldest first. */
  private readonly awaitingReply: { args: string[]; replyRule?: Rule }[] = [];
  private timer?: NodeJS.Timeout;
  private closed = false;
  /** The server closed its side (e.g. after QUIT): end once its last replies are delivered. */
  private serverGone = false;

  constructor(
    private readonly proxy: Proxy,
    private readonly client: Socket,
    private readonly upstream: Socket,
  ) {
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on('data', (chunk: Buffer) => this.fromClient(chunk));
    upstream.on('data', (chunk: Buffer) => this.fromServer(chunk));
    for (const socket of [client, upstream]) socket.on('error', () => this.destroy());
    client.on('close', () => this.destroy());
    upstream.on('close', () => {
      this.serverGone = true;
      this.pump();
    });
  }

  flush(): void {
    this.pump();
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    this.client.destroy();
    this.upstream.destroy();
    this.proxy.forget(this);
  }

  private fromClient(chunk: Buffer): void {
    for (const bytes of this.toServer.frames(chunk)) {
      const args = parseCommand(bytes);
      this.proxy.commands.push(args);
      this.toServer.queue.push({
        bytes,
        args,
        rule: this.proxy.takeRule(args, 'request'),
        replyRule: this.proxy.takeRule(args, 'reply'),
        at: performance.now() + this.proxy.latency,
      });
    }
    this.pump();
  }

  private fromServer(chunk: Buffer): void {
    for (const bytes of this.toClient.frames(chunk)) {
      // Replies come back in command order; pub/sub messages have no command (nothing waits).
      const pushed = isPushMessage(bytes);
      const request = pushed ? undefined : this.awaitingReply.shift();
      this.toClient.queue.push({
        bytes,
        args: request?.args,
        rule: request?.replyRule,
        at: performance.now() + this.proxy.latency,
      });
    }
    this.pump();
  }

  /** Forwards what is due, in order, unless the proxy or this connection holds traffic back. */
  private pump(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.closed) return;
    const now = performance.now();
    let next = Infinity;
    next = Math.min(next, this.drain(this.toServer, now, true));
    next = Math.min(next, this.drain(this.toClient, now, false));
    if (next < Infinity) this.timer = setTimeout(() => this.pump(), Math.max(0, next - now));
    else if (this.serverGone && this.toClient.queue.length === 0) this.destroy();
  }

  /** Forwards due messages of one direction; returns when the next one is due (or Infinity). */
  private drain(direction: Direction, now: number, toServer: boolean): number {
    for (let message = direction.queue[0]; message && !this.closed; message = direction.queue[0]) {
      if (this.stalled || this.proxy.mode === 'blackhole') return Infinity;
      if (message.at > now) return message.at;
      direction.queue.shift();
      if (toServer) {
        if (message.rule) this.fire(message.rule, message.args!);
        this.awaitingReply.push({ args: message.args!, replyRule: message.replyRule });
        this.upstream.write(message.bytes);
        continue;
      }
      if (this.proxy.mode === 'drop-replies') {
        this.lostData = true;
        continue;
      }
      if (message.rule && this.fire(message.rule, message.args!) === 'drop') continue;
      this.client.write(message.bytes);
    }
    return Infinity;
  }

  private fire(rule: Rule, args: string[]): 'drop' | 'pass' {
    const outcome = rule.action(this, args);
    rule.done(args);
    return outcome;
  }
}

/** Reassembles whole RESP messages from a byte stream. */
class Direction {
  readonly queue: Pending[] = [];
  private buffer: Buffer = Buffer.alloc(0);

  frames(chunk: Buffer): Buffer[] {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    const frames: Buffer[] = [];
    let start = 0;
    for (;;) {
      const end = messageEnd(this.buffer, start);
      if (end < 0) break;
      frames.push(this.buffer.subarray(start, end));
      start = end;
    }
    this.buffer = this.buffer.subarray(start);
    return frames;
  }
}

const CRLF = Buffer.from('\r\n');

/**
 * The offset just past the RESP value starting at `start` (RESP2 and RESP3, and inline commands),
 * or -1 when the buffer does not hold all of it yet.
 */
function messageEnd(buffer: Buffer, start: number): number {
  if (start >= buffer.length) return -1;
  const lineEnd = buffer.indexOf(CRLF, start);
  if (lineEnd < 0) return -1;
  const type = String.fromCharCode(buffer[start]!);
  const header = buffer.toString('latin1', start + 1, lineEnd);
  const afterLine = lineEnd + 2;
  switch (type) {
    case '+':
    case '-':
    case ':':
    case '_':
    case ',':
    case '#':
    case '(':
      return afterLine;
    case '$':
    case '=':
    case '!': {
      const length = Number(header);
      if (length < 0) return afterLine;
      const end = afterLine + length + 2;
      return end <= buffer.length ? end : -1;
    }
    case '*':
    case '~':
    case '>':
    case '%':
    case '|': {
      const count = Number(header) * (type === '%' || type === '|' ? 2 : 1);
      let offset = afterLine;
      for (let i = 0; i < count; i++) {
        offset = messageEnd(buffer, offset);
        if (offset < 0) return -1;
      }
      // An attribute precedes the value it describes.
      return type === '|' ? messageEnd(buffer, offset) : offset;
    }
    default:
      return afterLine; // an inline command: one line
  }
}

/** The arguments of one RESP command (an array of bulk strings), or of an inline command. */
function parseCommand(bytes: Buffer): string[] {
  if (bytes[0] !== 0x2a /* '*' */) return bytes.toString('utf8').trim().split(/\s+/);
  const args: string[] = [];
  let offset = bytes.indexOf(CRLF) + 2;
  while (offset < bytes.length) {
    const lineEnd = bytes.indexOf(CRLF, offset);
    const length = Number(bytes.toString('latin1', offset + 1, lineEnd));
    const start = lineEnd + 2;
    args.push(bytes.toString('utf8', start, start + length));
    offset = start + length + 2;
  }
  if (args.length > 0) args[0] = args[0]!.toLowerCase();
  return args;
}

/**
 * A pub/sub message the server pushes on its own (`message`, `pmessage`, `smessage`), which
 * answers no command. Subscribe confirmations do answer one, so they count as replies.
 */
function isPushMessage(bytes: Buffer): boolean {
  if (bytes[0] !== 0x2a && bytes[0] !== 0x3e) return false;
  const head = bytes.toString('latin1', 0, Math.min(bytes.length, 40)).toLowerCase();
  return /^[*>][34]\r\n\$\d+\r\n(message|pmessage|smessage)\r\n/.test(head);
}
