import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { freePort } from './free-port';
import { signalPid, trackPid, untrackPid } from './tracked-pids';

export interface StartRedisOptions {
  /** The `redis-server` binary to run. @default `REDIS_SERVER_BIN`, else `redis-server` on PATH */
  bin?: string;
  /** Port to listen on. @default a free port */
  port?: number;
  /** Extra `redis-server` arguments, e.g. `['--maxmemory', '10mb']`. */
  args?: string[];
  /** Arguments before the harness's own, e.g. a config file and `'--sentinel'`. */
  leadingArgs?: string[];
  /** How long to wait for the first PONG, in ms. @default 10000 */
  startTimeout?: number;
}

/** A private `redis-server` process for a test that needs to pause, kill or restart Redis. */
export interface RedisServer {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** Pid of the current process (a new one after `restart()`). */
  readonly pid: number;
  /** False once stopped or killed (until `restart()`). */
  readonly running: boolean;
  /** SIGTERM, then waits for the process to exit (SIGKILL after 5 s). */
  stop(): Promise<void>;
  /** SIGKILL, then waits for the process to exit: a crash, with no shutdown work. */
  kill(): Promise<void>;
  /** SIGSTOP: the server keeps its connections open but answers nothing (a GC pause, a hung VM). */
  pause(): void;
  /** SIGCONT after `pause()`. */
  resume(): void;
  /** Stops the server if it runs, then starts a fresh one (empty, no persistence) on the same port. */
  restart(): Promise<void>;
}

const servers = new Set<RedisServerProcess>();

/**
 * The binary the harness starts when a test names none: `REDIS_SERVER_BIN` (e.g. a test-only
 * Redis 6.2 or Valkey build, to run a suite against it), else `redis-server` on PATH.
 */
export function defaultRedisServerBin(): string {
  return process.env.REDIS_SERVER_BIN || 'redis-server';
}

const versions = new Map<string, number[]>();

/**
 * The version `bin --version` reports (`v=6.2.16` → `[6, 2, 16]`), so a topology passes only the
 * directives that server accepts. Valkey reports its own version (8.0.1), a superset of Redis 7.2.
 */
export function redisServerVersion(bin = defaultRedisServerBin()): number[] {
  let version = versions.get(bin);
  if (!version) {
    const output = execFileSync(bin, ['--version'], { encoding: 'utf8', timeout: 10_000 });
    const match = /\bv=(\d+)\.(\d+)\.(\d+)/.exec(output);
    if (!match) throw new Error(`Cannot read the version of ${bin} from: ${output}`);
    version = match.slice(1).map(Number);
    versions.set(bin, version);
  }
  return version;
}

/**
 * Starts `redis-server` with no persistence on 127.0.0.1 and resolves once it answers PING.
 * Stop it (or call `stopAllRedis()`) in `afterAll`; a process left behind by a timed-out test is
 * SIGKILLed when the jest process exits.
 */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisServer> {
  const server = new RedisServerProcess(
    options.bin ?? defaultRedisServerBin(),
    options.port ?? (await freePort()),
    options.args ?? [],
    options.startTimeout ?? 10_000,
    options.leadingArgs ?? [],
  );
  servers.add(server);
  await server.start();
  return server;
}

/** Stops every server this test file started. */
export async function stopAllRedis(): Promise<void> {
  const all = [...servers];
  servers.clear();
  await Promise.all(all.map((server) => server.stop()));
}

class RedisServerProcess implements RedisServer {
  private child?: ChildProcess;
  private exited?: Promise<void>;
  private paused = false;

  constructor(
    private readonly bin: string,
    readonly port: number,
    private readonly args: string[],
    private readonly startTimeout: number,
    private readonly leadingArgs: string[],
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number {
    if (!this.child?.pid) throw new Error(`redis-server on port ${this.port} is not running`);
    return this.child.pid;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  async start(): Promise<void> {
    if (this.child) throw new Error(`redis-server on port ${this.port} is already running`);
    const args = [
      ...this.leadingArgs,
      ...['--port', String(this.port), '--bind', '127.0.0.1'],
      ...['--save', '', '--appendonly', 'no'],
      ...this.args,
    ];
    const child = spawn(this.bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const spawned = once(child, 'spawn');
    // 'error' (e.g. ENOENT when redis-server is not installed) rejects the 'spawn' wait above.
    await spawned.catch((error: unknown) => {
      throw new Error(`Could not start ${this.bin} (is it installed?): ${String(error)}`);
    });
    const pid = child.pid!;
    trackPid(pid);
    this.child = child;
    this.paused = false;
    this.exited = new Promise<void>((resolve) => {
      child.once('exit', () => {
        untrackPid(pid);
        if (this.child === child) this.child = undefined;
        resolve();
      });
    });

    const deadline = Date.now() + this.startTimeout;
    for (;;) {
      if (await ping(this.port, 500)) return;
      if (this.child !== child) {
        throw new Error(`redis-server on port ${this.port} exited while starting:\n${output}`);
      }
      if (Date.now() > deadline) {
        await this.kill();
        throw new Error(`redis-server on port ${this.port} did not answer PING:\n${output}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    signalPid(child.pid!, 'SIGTERM');
    // A stopped process only acts on SIGTERM once continued.
    if (this.paused) this.resume();
    const timer = setTimeout(() => signalPid(child.pid!, 'SIGKILL'), 5_000);
    await this.exited;
    clearTimeout(timer);
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    signalPid(child.pid!, 'SIGKILL');
    await this.exited;
  }

  pause(): void {
    signalPid(this.pid, 'SIGSTOP');
    this.paused = true;
  }

  resume(): void {
    signalPid(this.pid, 'SIGCONT');
    this.paused = false;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }
}

/** Whether something on 127.0.0.1:`port` answers `PING` with `+PONG` within `timeout` ms. */
export function ping(port: number, timeout: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    const finish = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), timeout);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) finish(reply.startsWith('+PONG'));
    });
    socket.once('error', () => finish(false));
  });
}
