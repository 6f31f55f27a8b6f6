import { Assignment, partitionKeyOf } from '../../contracts';
import { assignPartitions, movedPartitions } from '../../workflows/assignment';

const partitions = (n: number, topic = 'orders') => Array.from({ length: n }, (_, p) => partitionKeyOf(topic, p));

function counts(a: Assignment): Record<string, number> {
  const c: Record<string, number> = {};
  for (const owner of Object.values(a)) if (owner) c[owner] = (c[owner] ?? 0) + 1;
  return c;
}

/** Joins instances one by one, as they would boot. */
function grow(keys: string[], instances: string[]): Assignment {
  let current: Assignment = {};
  for (let i = 1; i <= instances.length; i++)
    current = assignPartitions({ partitions: keys, eligible: instances.slice(0, i), current });
  return current;
}

describe('assignPartitions', () => {
  const six = partitions(6);

  it('gives each of 3 instances exactly 2 of 6 partitions', () => {
    expect(counts(grow(six, ['i1', 'i2', 'i3']))).toEqual({ i1: 2, i2: 2, i3: 2 });
  });

  it('moves only one partition when a 4th instance joins 3 that own 2 each', () => {
    const before = grow(six, ['i1', 'i2', 'i3']);
    const after = assignPartitions({ partitions: six, eligible: ['i1', 'i2', 'i3', 'i4'], current: before });
    const moved = movedPartitions(before, after);
    expect(moved).toHaveLength(1);
    expect(after[moved[0]]).toBe('i4');
    expect(Object.values(counts(after)).sort()).toEqual([1, 1, 2, 2]);
  });

  it('moves only the lost instance partitions, and gives them back on its return without moving any other', () => {
    const before = grow(six, ['i1', 'i2', 'i3']);
    const lost = assignPartitions({ partitions: six, eligible: ['i1', 'i3'], current: before });
    const movedOnLoss = movedPartitions(before, lost);
    expect(movedOnLoss.sort()).toEqual(six.filter((p) => before[p] === 'i2').sort());
    expect(counts(lost)).toEqual({ i1: 3, i3: 3 });

    const healed = assignPartitions({ partitions: six, eligible: ['i1', 'i2', 'i3'], current: lost });
    const movedOnHeal = movedPartitions(lost, healed);
    expect(movedOnHeal).toHaveLength(2);
    for (const p of movedOnHeal) expect(healed[p]).toBe('i2');
    expect(counts(healed)).toEqual({ i1: 2, i2: 2, i3: 2 });
  });

  it('is deterministic: the same input gives the same output whatever the order of its lists', () => {
    const current = grow(six, ['i1', 'i2']);
    const a = assignPartitions({ partitions: six, eligible: ['i3', 'i1', 'i2'], current });
    const b = assignPartitions({ partitions: [...six].reverse(), eligible: ['i2', 'i3', 'i1'], current });
    expect(a).toEqual(b);
  });

  it('leaves every partition unowned when no instance is eligible', () => {
    expect(Object.values(assignPartitions({ partitions: six, eligible: [], current: grow(six, ['i1']) }))).toEqual(
      Array(6).fill(undefined),
    );
  });

  it('keeps an operator pin, moving another partition off the target if it goes over its share', () => {
    const before = grow(six, ['i1', 'i2', 'i3']);
    const target = six.find((p) => before[p] === 'i1')!;
    const after = assignPartitions({
      partitions: six,
      eligible: ['i1', 'i2', 'i3'],
      current: before,
      pins: { [target]: 'i2' },
    });
    expect(after[target]).toBe('i2');
    expect(counts(after)).toEqual({ i1: 2, i2: 2, i3: 2 });
    expect(movedPartitions(before, after)).toHaveLength(2);
  });

  it('ignores a pin to an instance that is not eligible (drained or gone)', () => {
    const before = grow(six, ['i1', 'i2']);
    const after = assignPartitions({
      partitions: six,
      eligible: ['i1', 'i2'],
      current: before,
      pins: { [six[0]]: 'i9' },
    });
    expect(after).toEqual(before);
  });

  it('balances 7 partitions over 3 instances as 3/2/2 and spreads several topics', () => {
    expect(Object.values(counts(grow(partitions(7), ['a', 'b', 'c']))).sort()).toEqual([2, 2, 3]);
    const two = [...partitions(3, 'x'), ...partitions(3, 'y')];
    expect(counts(grow(two, ['a', 'b', 'c']))).toEqual({ a: 2, b: 2, c: 2 });
  });
});
