import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';

/**
 * Every option name of `T`, as an object the compiler checks against the interface both ways: an
 * option added to the interface and not here (or listed here and gone from it) does not compile.
 */
export type OptionNames<T> = Record<keyof T, true>;

/**
 * Refuses a key `known` does not list, naming the closest valid one: a misspelt option (or one
 * from another library, like `keyPrefix`) would otherwise be ignored and its default used.
 */
export function assertKnownOptions(
  where: string,
  options: object,
  known: object,
  aliases: Readonly<Record<string, string>> = {},
): void {
  const names = Object.keys(known);
  for (const name of Object.keys(options)) {
    if (!names.includes(name)) {
      const meant = Object.hasOwn(aliases, name) ? aliases[name] : closestName(name, names);
      throw new RedisLockConfigError(messages.unknownOption(where, name, meant, names));
    }
  }
}

/**
 * The name nearest to `name` (case-insensitive edit distance, or one containing the other), or
 * undefined when none is near enough to be a likely typo.
 */
export function closestName(name: string, names: readonly string[]): string | undefined {
  const wanted = name.toLowerCase();
  let best: { name: string; distance: number } | undefined;
  for (const candidate of names) {
    const lower = candidate.toLowerCase();
    const contains =
      Math.min(lower.length, wanted.length) >= 4 &&
      (lower.includes(wanted) || wanted.includes(lower));
    const distance = contains ? 0 : editDistance(wanted, lower);
    // One edit per three letters (at least one): `tll` → `ttl`, never `url` → `ttl`.
    if (
      distance <= Math.max(1, Math.floor(wanted.length / 3)) &&
      distance < (best?.distance ?? Infinity)
    ) {
      best = { name: candidate, distance };
    }
  }
  return best?.name;
}

/**
 * Edit distance with adjacent transpositions (optimal string alignment): insertions, deletions,
 * substitutions and swaps of two neighbours (`wiat` → `wait`) each cost one, one row at a time.
 * `previous` and `before` hold the rows for `a`'s first i - 1 and i - 2 characters (b.length + 1
 * entries each); `row` grows by one entry per character of `b`, so every index read is filled.
 */
function editDistance(a: string, b: string): number {
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      let best = Math.min(previous[j]! + 1, row[j - 1]! + 1, substitution);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, before[j - 2]! + 1);
      }
      row.push(best);
    }
    before = previous;
    previous = row;
  }
  return previous[b.length]!;
}
