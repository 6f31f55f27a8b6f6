import { slope } from './soak';

describe('soak memory slope', () => {
  it('is the least-squares slope of the samples', () => {
    expect(
      slope([
        { x: 0, y: 100 },
        { x: 1, y: 102 },
        { x: 2, y: 104 },
      ]),
    ).toBeCloseTo(2);
    // Noise around a flat line: no slope.
    expect(
      slope([
        { x: 0, y: 100 },
        { x: 1, y: 101 },
        { x: 2, y: 99 },
        { x: 3, y: 100 },
      ]),
    ).toBeCloseTo(-0.2);
  });

  it('is undefined (NaN) with fewer than two samples or one instant', () => {
    expect(slope([{ x: 0, y: 1 }])).toBeNaN();
    expect(
      slope([
        { x: 1, y: 1 },
        { x: 1, y: 2 },
      ]),
    ).toBeNaN();
  });
});
