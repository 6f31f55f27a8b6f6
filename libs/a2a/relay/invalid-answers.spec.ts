import { A2AError, InvalidAgentResponseError, TaskNotFoundError } from '@a2a-js/sdk/errors';
import { invalidAnswer, invalidAnswerOf } from './agent-task-follower';
import { failedOnInvalidAnswer, isAnswerTooLarge, isInvalidAnswer } from './invalid-answers';
import { AgentAnswerTooLarge } from './request-fetch';
import type { StoredTask } from '../tasks/task-store';

/** What counts as an agent's answer that is not A2A (the task fails, -32006), and what as an agent not reached. */
describe('invalid agent answers', () => {
  it("counts the SDK client's errors for an answer that is not A2A, and nothing that says the agent was not reached", () => {
    for (const e of [
      new InvalidAgentResponseError('Invalid SSE event'),
      new SyntaxError('Unexpected token < in JSON at position 0'),
      new Error('Invalid response: missing payload'),
      new Error("Invalid JSON-RPC response for SendMessage: expected 'jsonrpc' to be exactly '2.0', got undefined."),
      new Error('JSON-RPC response ID mismatch for method SendMessage. Expected 3, got 4.'),
      new A2AError('Invalid SendMessageResponse: missing result'),
      new Error('Failed to parse SSE event data: "<html>...". Original error: Unexpected token'),
      new Error("SSE event JSON-RPC response is missing 'result' field. Data: {}"),
      new Error('Attempted to process empty SSE event data.'),
    ])
      expect(isInvalidAnswer(e)).toBe(true);
    for (const e of [
      new TypeError('fetch failed'),
      new SyntaxError('Unexpected end of JSON input'),
      new Error('HTTP error for SendMessage! Status: 503 Service Unavailable. Response: busy'),
      new TaskNotFoundError('no task'),
      'a string',
    ])
      expect(isInvalidAnswer(e)).toBe(false);
  });

  it('marks the failure in the status message, which the blocking send reads back', () => {
    const task = { id: 't1', contextId: 'c1', state: 'working', statusMessage: null } as StoredTask;
    const change = invalidAnswer(task, 'Invalid response: missing payload');
    expect(change).toMatchObject({
      state: 'failed',
      statusMessage: {
        role: 'ROLE_AGENT',
        taskId: 't1',
        parts: [{ text: "the agent's answer is not a valid A2A answer: Invalid response: missing payload" }],
      },
    });
    expect(failedOnInvalidAnswer({ state: 'failed', statusMessage: change.statusMessage! })).toBe(true);
    expect(failedOnInvalidAnswer({ state: 'working', statusMessage: change.statusMessage! })).toBe(false);
    expect(
      failedOnInvalidAnswer({ state: 'failed', statusMessage: { parts: [{ text: 'the agent refused the task' }] } }),
    ).toBe(false);
    expect(failedOnInvalidAnswer({ state: 'failed', statusMessage: null })).toBe(false);
  });

  it("counts an answer too large to read as one (the task fails at once), saying why: the cap, or the SDK's stream event limit", () => {
    const task = { id: 't1', contextId: 'c1', state: 'working', statusMessage: null } as StoredTask;
    const ours = new AgentAnswerTooLarge(1024, 'answer');
    const sdks = new Error(
      'SSE event data exceeded the maximum allowed size of 4194304 bytes. Pass maxEventSizeBytes to raise the limit, or prefer FileWithUri parts for large payloads.',
    );
    for (const e of [ours, sdks]) expect([isAnswerTooLarge(e), isInvalidAnswer(e)]).toEqual([true, true]);
    expect(isAnswerTooLarge(new Error('fetch failed'))).toBe(false);
    const change = invalidAnswerOf(task, ours);
    expect(change).toMatchObject({
      state: 'failed',
      statusMessage: {
        parts: [
          {
            text: "the agent's answer is larger than the mesh reads (EVENTMESH_AGENTS_MAX_ANSWER_BYTES = 1024 bytes); the read was aborted",
          },
        ],
      },
    });
    expect(failedOnInvalidAnswer({ state: 'failed', statusMessage: change.statusMessage! })).toBe(true);
    expect(invalidAnswerOf(task, sdks)).toMatchObject({
      statusMessage: {
        parts: [
          {
            text: "the agent's stream event is larger than the A2A client reads (4194304 bytes); the read was aborted",
          },
        ],
      },
    });
  });
});
