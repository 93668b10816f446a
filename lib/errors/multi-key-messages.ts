/** Messages of multi-key locks (see messages.ts for the rest), each saying what to do next. */
export const multiKeyMessages = {
  noKeys: () =>
    'A multi-key lock call got an empty array of keys. Pass at least one key, e.g. ' +
    "`['account:1', 'account:2']`; an empty array would protect nothing.",
  notAnArray: (what: string) => `A multi-key lock call needs an array of key strings, got ${what}.`,
  exclusiveOnly: (option: string) =>
    `Lock option \`${option}\` cannot be combined with several keys: a multi-key lock takes a ` +
    'plain exclusive lock on every key. Lock the keys one call each for that kind of lock.',
  partlyHeld: (held: number, total: number) =>
    `This call chain already holds ${held} of the ${total} keys of this multi-key lock call, ` +
    'through other lock calls. Taking the rest now could deadlock with a caller that takes them ' +
    'in another order: take every key in one call at the outermost level (a nested call on all ' +
    'of them, or some of them, then joins that lock).',
  together: (keys: readonly string[]) =>
    `(one of the ${keys.length} keys asked for together: ` +
    `${keys.map((key) => `"${key}"`).join(', ')}; none of them was taken)`,
};
