import { LinkedSet, type Linked } from './linked-set';

class Item implements Linked<Item> {
  linkedPrev: Item | undefined = undefined;
  linkedNext: Item | undefined = undefined;
  linkedIn: object | undefined = undefined;
  constructor(readonly name: string) {}
}

const names = (set: LinkedSet<Item>): string[] => set.toArray().map((item) => item.name);

describe('LinkedSet', () => {
  it('keeps insertion order, and adds and deletes each item once', () => {
    const set = new LinkedSet<Item>();
    const [a, b, c] = ['a', 'b', 'c'].map((name) => new Item(name)) as [Item, Item, Item];
    expect([set.add(a), set.add(b), set.add(c), set.add(b)]).toEqual([true, true, true, false]);
    expect(names(set)).toEqual(['a', 'b', 'c']);
    expect(set.delete(b)).toBe(true);
    expect(set.delete(b)).toBe(false);
    expect(names(set)).toEqual(['a', 'c']);
    expect(set.delete(a) && set.delete(c)).toBe(true);
    expect([set.size, names(set)]).toEqual([0, []]);
    set.add(b);
    expect(names(set)).toEqual(['b']);
  });

  it("never touches another set's item: membership is the item's own record", () => {
    const one = new LinkedSet<Item>();
    const other = new LinkedSet<Item>();
    const item = new Item('x');
    one.add(item);
    expect(other.has(item)).toBe(false);
    expect(other.delete(item)).toBe(false);
    expect(() => other.add(item)).toThrow(/another set/);
    expect([one.has(item), one.size, other.size]).toEqual([true, 1, 0]);
  });

  it('walks a snapshot: items deleted or added meanwhile do not break the walk', () => {
    const set = new LinkedSet<Item>();
    const items = ['a', 'b', 'c', 'd'].map((name) => new Item(name));
    items.forEach((item) => set.add(item));
    const seen: string[] = [];
    for (const item of set.toArray()) {
      seen.push(item.name);
      set.delete(item);
      if (item.name === 'b') set.delete(items[2]!);
    }
    expect(seen).toEqual(['a', 'b', 'c', 'd']);
    expect(set.size).toBe(0);
  });
});
