import { hostProcess } from './host-process';

const REGISTRY = Symbol.for('nestjs-redis-lock:test:child-pids');
type HostWithRegistry = NodeJS.Process & { [REGISTRY]?: Set<number> };

/**
 * Pids of every child process the harness started and has not seen exit, shared by all test files
 * of one jest process (the registry lives on the host process, not in a file's module registry).
 * When the jest process exits — including after a test timed out — the survivors are SIGKILLed.
 */
function registry(): Set<number> {
  const host = hostProcess as HostWithRegistry;
  let pids = host[REGISTRY];
  if (!pids) {
    const created = new Set<number>();
    host[REGISTRY] = created;
    host.on('exit', () => {
      for (const pid of created) signalPid(pid, 'SIGKILL');
    });
    pids = created;
  }
  return pids;
}

export function trackPid(pid: number): void {
  registry().add(pid);
}

export function untrackPid(pid: number): void {
  registry().delete(pid);
}

/** Sends `signal` to `pid`; false when the process is already gone. */
export function signalPid(pid: number, signal: NodeJS.Signals): boolean {
  try {
    return hostProcess.kill(pid, signal);
  } catch {
    return false;
  }
}
