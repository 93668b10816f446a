/**
 * What callers are told about a lock failure by default (`errorDetails: 'safe'`): nothing about
 * the request, the key or Redis, and no advice meant for developers — that goes to the log.
 */
export const publicMessages = {
  busy: () => 'Another request is working on the same resource. Try again shortly.',
  badRequest: () => 'The request is missing a value this operation needs, or a value is invalid.',
  unavailable: () => 'The service is temporarily unavailable. Try again later.',
  serverError: () => 'The server could not process the request.',
  outcomeUnknown: () =>
    'The request was processed, but its outcome could not be confirmed. Check the result before ' +
    'repeating it.',
};

/** The log line that keeps what a lock failure's answer leaves out. */
export const failureAnswered = (where: string, answer: string, error: Error): string =>
  `${where} answered ${answer}: ${error.name}: ${error.message}`;
