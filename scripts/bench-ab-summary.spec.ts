import { compare, ratiosOf } from './bench-ab-summary';

describe('bench:ab summary', () => {
  it('keys each ratio line by its text before the ratio, digits masked, and numbers repeated keys', () => {
    const log = [
      'throughput ratio: median 0.92x (goal >= 0.8x); per round 0.92',
      'p99 at half load 40.1 ms',
      'ordering partition: median ratio 1.21x, per round 1.21',
      'ordering partition: median ratio 3.10x, per round 3.10',
      '- path 2 of 3: 1.5x',
      '| partition | 1 | 0.66x | 0.70x |',
    ].join('\n');
    expect([...ratiosOf(log)]).toEqual([
      ['throughput ratio: median', 0.92],
      ['ordering partition: median ratio', 1.21],
      ['ordering partition: median ratio (2)', 3.1],
      ['- path # of #:', 1.5],
    ]);
  });

  it('calls a difference of the medians within the larger spread of the rounds "within spread", else says which way', () => {
    const round = (x: number, y: number) =>
      new Map([
        ['r', x],
        ['s', y],
      ]);
    const rows = compare({
      A: [round(1.0, 1.0), round(0.8, 1.0), round(0.9, 1.0)],
      B: [round(1.1, 1.3), round(0.95, 1.3), round(1.0, 1.3)],
    });
    expect(rows.map((r) => [r.line, r.verdict])).toEqual([
      ['r', 'within spread'], // medians 0.9 and 1.0, spread 0.2
      ['s', 'B higher'], // medians 1.0 and 1.3, spread 0
    ]);
    const lower = compare({ A: [round(1, 1.3)], B: [round(1, 1.0)] });
    expect(lower[1].verdict).toBe('B lower');
  });

  it('leaves out a ratio that a round of either side did not print', () => {
    const rows = compare({
      A: [
        new Map([
          ['r', 1],
          ['only-a', 2],
        ]),
      ],
      B: [new Map([['r', 1]])],
    });
    expect(rows.map((r) => r.line)).toEqual(['r']);
  });
});
