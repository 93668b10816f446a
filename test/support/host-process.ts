import { runInThisContext } from 'node:vm';

/**
 * The real Node process. Inside a jest test file `process` is a sandboxed copy: listeners added to
 * it for 'exit' or 'unhandledRejection' never fire. The host process is the one that emits them.
 * Outside jest (a worker run with ts-register) this is simply `process`.
 */
export const hostProcess = runInThisContext('process') as NodeJS.Process;
