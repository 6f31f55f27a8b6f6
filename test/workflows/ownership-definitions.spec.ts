import { controlWorkflowTaskTimeoutMs } from '../../contracts';

describe('controlWorkflowTaskTimeoutMs', () => {
  it('is half the lease TTL, within 2-10 s', () => {
    expect(controlWorkflowTaskTimeoutMs(4_000)).toBe(2_000);
    expect(controlWorkflowTaskTimeoutMs(10_000)).toBe(5_000);
    expect(controlWorkflowTaskTimeoutMs(15_001)).toBe(7_500);
    expect(controlWorkflowTaskTimeoutMs(1_000)).toBe(2_000);
    expect(controlWorkflowTaskTimeoutMs(60_000)).toBe(10_000);
  });
});
