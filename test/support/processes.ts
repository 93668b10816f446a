import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { signalPid, trackPid, untrackPid } from './tracked-pids';

const root = resolve(__dirname, '../..');
const tsRegister = resolve(__dirname, '../../tools/ts-register.js');

/** How a worker process ended, with everything it printed. */
export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A separate Node process running a .ts file (through ts-register), as another app instance would. */
export interface Worker {
  readonly pid: number;
  readonly stdout: string;
  readonly stderr: string;
  /** Resolves when the process exited, however it ended. */
  readonly exited: Promise<WorkerExit>;
  /** Resolves with the match once stdout matches `pattern`; rejects on exit or after `timeout`. */
  waitForOutput(pattern: RegExp, timeout?: number): Promise<RegExpMatchArray>;
  /** Writes a line to the worker's stdin. */
  send(line: string): void;
  /** Closes the worker's stdin (end of input). */
  end(): void;
  /** Resolves stdout when the worker exited with code 0; else rejects with its stderr. */
  succeeded(): Promise<string>;
  kill(signal?: NodeJS.Signals): void;
}

const workers = new Set<ChildProcess>();

/**
 * Spawns `node -r tools/ts-register.js <file>` with `env` on top of this process's env
 * (`file` relative to the repository root, or absolute). Kill leftovers with `killAllWorkers()`
 * in `afterAll`; any still alive when the jest process exits are SIGKILLed.
 */
export function spawnWorker(file: string, env: Record<string, string> = {}): Worker {
  const child = spawn(process.execPath, ['-r', tsRegister, resolve(root, file)], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`Could not spawn a worker for ${file}`);
  trackPid(pid);
  workers.add(child);

  let stdout = '';
  let stderr = '';
  const onStdout: (() => void)[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    for (const listener of [...onStdout]) listener();
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // A worker that exits early must not turn our writes to its stdin into an 'error' crash.
  child.stdin.on('error', () => undefined);

  const exited = new Promise<WorkerExit>((resolveExit) => {
    child.once('close', (code, signal) => {
      untrackPid(pid);
      workers.delete(child);
      for (const listener of [...onStdout]) listener();
      resolveExit({ code, signal, stdout, stderr });
    });
  });
  let done = false;
  void exited.then(() => (done = true));

  return {
    pid,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    exited,
    waitForOutput(pattern, timeout = 20_000) {
      return new Promise((resolveMatch, reject) => {
        const check = (): void => {
          const match = stdout.match(pattern);
          if (match) finish(() => resolveMatch(match));
          else if (done) {
            finish(() =>
              reject(new Error(`${file} exited before printing ${pattern}:\n${stderr}`)),
            );
          }
        };
        const timer = setTimeout(
          () => finish(() => reject(new Error(`${file} did not print ${pattern}:\n${stderr}`))),
          timeout,
        );
        let settled = false;
        const finish = (settle: () => void): void => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          onStdout.splice(onStdout.indexOf(check), 1);
          settle();
        };
        onStdout.push(check);
        check();
      });
    },
    send(line) {
      child.stdin.write(`${line}\n`);
    },
    end() {
      child.stdin.end();
    },
    async succeeded() {
      const exit = await exited;
      if (exit.code !== 0) {
        throw new Error(
          `${file} exited with ${exit.signal ?? `code ${exit.code}`}:\n${exit.stderr}${exit.stdout}`,
        );
      }
      return exit.stdout;
    },
    kill(signal = 'SIGKILL') {
      signalPid(pid, signal);
    },
  };
}

/** SIGKILLs every worker this test file spawned that is still running. */
export async function killAllWorkers(): Promise<void> {
  const running = [...workers];
  await Promise.all(
    running.map(
      (child) =>
        new Promise<void>((resolveClose) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolveClose();
          child.once('close', () => resolveClose());
          signalPid(child.pid!, 'SIGKILL');
        }),
    ),
  );
}
