import { hostProcess } from './host-process';

/**
 * "No unhandled rejection, ever", enforced on every e2e test: a rejection nobody
 * handled while a test (or its hooks) ran fails that test, even one raised from a timer after the
 * test's own assertions passed. The listener goes on the host process: the `process` a test file
 * sees is a sandboxed copy whose listeners never fire.
 */
const unhandled: unknown[] = [];
const record = (reason: unknown): void => {
  unhandled.push(reason);
};
hostProcess.on('unhandledRejection', record);

function failOnUnhandled(when: string): void {
  if (unhandled.length === 0) return;
  const reasons = unhandled.splice(0);
  const list = reasons.map((reason) =>
    reason instanceof Error ? (reason.stack ?? reason.message) : String(reason),
  );
  throw new Error(`${reasons.length} unhandled rejection(s) ${when}:\n${list.join('\n\n')}`);
}

afterEach(() => failOnUnhandled('during this test'));

afterAll(async () => {
  // Let rejections of timers and sockets closed by the file's own afterAll hooks surface first.
  await new Promise((resolve) => setTimeout(resolve, 20));
  hostProcess.off('unhandledRejection', record);
  failOnUnhandled('after the last test of this file');
});

jest.setTimeout(60_000);
