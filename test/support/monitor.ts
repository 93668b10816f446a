/**
 * Watches what a redis-server runs with MONITOR, on a plain socket. Not ioredis' monitor mode: it
 * enters that mode only in a `.then` after MONITOR's answer, so a command another client sends at
 * that moment arrives as a reply nothing asked for ("Command queue state error") and fails the
 * test — and a test monitors precisely while other clients talk.
 */
import { createConnection } from 'node:net';
import Redis from 'ioredis';
import { waitFor } from './time';

/** One command the server ran, as MONITOR reports it. */
export interface MonitoredCommand {
  args: string[];
  /** True for a command a Lua script ran, false for one a client sent. */
  fromScript: boolean;
}

export interface ServerMonitor {
  /** What the server ran since the monitor started, in order (it grows while the monitor runs). */
  readonly commands: MonitoredCommand[];
  /** Stops once everything the server ran before this call has come through; resolves the log. */
  stop(): Promise<MonitoredCommand[]>;
}

/** Starts monitoring the server at `url`; resolves once the server has confirmed MONITOR. */
export async function monitorServer(url: string): Promise<ServerMonitor> {
  const { hostname, port } = new URL(url);
  const socket = createConnection({ host: hostname, port: Number(port) });
  const commands: MonitoredCommand[] = [];
  let confirmed: () => void = () => undefined;
  let failed: (error: Error) => void = () => undefined;
  const started = new Promise<void>((resolve, reject) => {
    confirmed = resolve;
    failed = reject;
  });
  let pending = '';
  socket.setEncoding('latin1');
  socket.on('error', (error) => failed(error));
  socket.on('data', (chunk: string) => {
    pending += chunk;
    let end: number;
    while ((end = pending.indexOf('\r\n')) >= 0) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 2);
      if (line === '+OK') confirmed();
      else if (line.startsWith('-')) failed(new Error(`MONITOR refused: ${line.slice(1)}`));
      else if (line.startsWith('+')) commands.push(parseLine(line));
    }
  });
  socket.write('MONITOR\r\n');
  try {
    await Promise.race([
      started,
      new Promise((_, reject) => setTimeout(() => reject(new Error('MONITOR: no answer')), 5_000)),
    ]);
  } catch (error) {
    socket.destroy();
    throw error;
  }
  return {
    commands,
    async stop() {
      const marker = `monitor-end-${Math.random()}`;
      const sender = new Redis(url);
      try {
        await sender.echo(marker);
      } finally {
        sender.disconnect();
      }
      await waitFor(() => commands.some((entry) => entry.args.includes(marker)), 5_000);
      socket.destroy();
      return commands;
    },
  };
}

/**
 * One MONITOR line: `+<time> [<db> <source>] "<arg>" "<arg>" …`, where the source is `lua` for a
 * command a script ran, and each argument is quoted with Redis' escapes (`\"`, `\\`, `\n`, `\xHH`).
 */
function parseLine(line: string): MonitoredCommand {
  const open = line.indexOf('[');
  const close = line.indexOf(']', open);
  const source = line.slice(open + 1, close).split(' ')[1];
  const args = [...line.slice(close + 1).matchAll(/"((?:\\.|[^"\\])*)"/g)].map((match) =>
    match[1]!.replace(/\\x([0-9a-fA-F]{2})|\\(.)/g, (_, hex: string | undefined, char: string) =>
      hex ? String.fromCharCode(parseInt(hex, 16)) : (ESCAPES[char] ?? char),
    ),
  );
  return { args, fromScript: source === 'lua' };
}

const ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' };
