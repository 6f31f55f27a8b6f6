import { EventMeshError } from '@libs/errors';
import { parseAgentUpdate } from './agent-updates';

describe("a subscriber agent's update", () => {
  it('reads the state in either spelling, a status message and artifacts', () => {
    expect(parseAgentUpdate({ state: 'TASK_STATE_COMPLETED' }).state).toBe('completed');
    expect(parseAgentUpdate({ state: 'input-required' }).state).toBe('input-required');
    const update = parseAgentUpdate({
      state: 'working',
      message: { messageId: 'm', role: 'ROLE_AGENT', parts: [{ text: 'on it' }] },
      artifacts: [{ artifactId: 'a1', parts: [{ text: 'x' }] }],
    });
    expect(update.message).toMatchObject({ messageId: 'm', parts: [{ text: 'on it' }] });
    expect(update.artifacts).toEqual([expect.objectContaining({ artifactId: 'a1' })]);
  });

  it.each([
    ['not an object', [], 'body'],
    ['no state', {}, 'state'],
    ['an unknown state', { state: 'done' }, 'state'],
    ['submitted (where tasks start)', { state: 'submitted' }, 'state'],
    [
      'a message without parts',
      { state: 'working', message: { messageId: 'm', role: 'ROLE_AGENT', parts: [] } },
      'message.parts',
    ],
    ['artifacts that are not a list', { state: 'working', artifacts: {} }, 'artifacts'],
    ['an artifact without id', { state: 'working', artifacts: [{ parts: [{ text: 'x' }] }] }, 'artifacts.0'],
  ])('refuses %s, naming the field', (_, body, field) => {
    let error: unknown;
    try {
      parseAgentUpdate(body);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(EventMeshError);
    expect((error as EventMeshError).details).toMatchObject({ field });
  });
});
