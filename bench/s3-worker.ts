/**
 * One S3P worker process: holds one session of the contender it is told to, and runs one worker
 * loop per "go" message. Spawned and stopped by bench/run.ts over IPC.
 */
import { contenderById, type Session } from './lib/contenders';
import { runWorker, type ContendedPlan, type HoldRecord } from './lib/contended';

type Message =
  | { type: 'open'; contender: string; url: string }
  | { type: 'go'; worker: number; plan: ContendedPlan }
  | { type: 'close' }
  | { type: 'exit' };

let session: Session | undefined;

function send(message: unknown): void {
  process.send!(message);
}

process.on('message', (message: Message) => {
  void (async () => {
    try {
      if (message.type === 'open') {
        session = await contenderById(message.contender).open(message.url);
        send({ type: 'opened' });
      } else if (message.type === 'go') {
        const records: HoldRecord[] = [];
        const errors: string[] = [];
        await runWorker(session!, message.worker, message.plan, records, errors);
        send({ type: 'done', records, errors });
      } else if (message.type === 'close') {
        await session?.close();
        session = undefined;
        send({ type: 'closed' });
      } else if (message.type === 'exit') {
        process.disconnect();
      }
    } catch (error) {
      send({ type: 'error', message: error instanceof Error ? error.stack : String(error) });
    }
  })();
});

// The parent went away: leave at once, never linger.
process.on('disconnect', () => process.exit(0));
