import { EventMeshError } from '@libs/errors';
import { DEFAULT_DELIVERY_RETRY } from '../../../contracts';
import { TASK_POLICY_EXTENSION, taskPolicyOf } from './task-policy';

const cardWith = (params: unknown, extra: unknown[] = []) => ({
  capabilities: { extensions: [...extra, { uri: TASK_POLICY_EXTENSION, params }] },
});
const refusal = (card: unknown) => {
  try {
    taskPolicyOf(card as never, 30000);
  } catch (e) {
    expect(e).toBeInstanceOf(EventMeshError);
    return { code: (e as EventMeshError).code, field: (e as EventMeshError).details.field };
  }
  throw new Error('not refused');
};

describe('taskPolicyOf', () => {
  it('is the configured timeout and the default retry without the extension', () => {
    expect(taskPolicyOf({}, 30000)).toEqual({ timeoutMs: 30000, retry: DEFAULT_DELIVERY_RETRY });
    expect(taskPolicyOf({ capabilities: { extensions: [{ uri: 'urn:other' }] } }, 30000)).toEqual({
      timeoutMs: 30000,
      retry: DEFAULT_DELIVERY_RETRY,
    });
    expect(taskPolicyOf(cardWith(undefined), 30000)).toEqual({ timeoutMs: 30000, retry: DEFAULT_DELIVERY_RETRY });
  });

  it("takes the extension's fields over the defaults, field by field", () => {
    expect(
      taskPolicyOf(
        cardWith({ timeoutMs: 5000, retry: { maximumAttempts: 3 } }, [{ uri: 'urn:other', params: { x: 1 } }]),
        30000,
      ),
    ).toEqual({
      timeoutMs: 5000,
      retry: { ...DEFAULT_DELIVERY_RETRY, maximumAttempts: 3 },
    });
  });

  it('refuses a malformed policy with INVALID_AGENT_CARD naming the field', () => {
    expect(refusal(cardWith({ timeoutMs: 10 }))).toEqual({
      code: 'INVALID_AGENT_CARD',
      field: 'capabilities.extensions.0.params.timeoutMs',
    });
    expect(refusal(cardWith({ retry: { backoffCoefficient: 0.5 } }, [{ uri: 'urn:other' }]))).toEqual({
      code: 'INVALID_AGENT_CARD',
      field: 'capabilities.extensions.1.params.retry.backoffCoefficient',
    });
    expect(refusal(cardWith({ retries: 3 }))).toEqual({
      code: 'INVALID_AGENT_CARD',
      field: 'capabilities.extensions.0.params',
    });
    expect(refusal(cardWith({ retry: { initialIntervalMs: 2000, maximumIntervalMs: 1000 } }))).toEqual({
      code: 'INVALID_AGENT_CARD',
      field: 'capabilities.extensions.0.params.retry.maximumIntervalMs',
    });
  });
});
