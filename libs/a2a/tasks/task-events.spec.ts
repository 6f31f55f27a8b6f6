import { StreamResponse, TaskState } from '@a2a-js/sdk';
import { createdEventOf, draftsOf, eventsOf, sameJson, TaskVersion } from './task-events';
import { parseLastEventId, stateOfEvent, streamResponseOf } from './task-stream';

const at = new Date('2026-12-01T10:00:00.000Z');
const message = (text: string) => ({ messageId: text, role: 'ROLE_AGENT', parts: [{ text }] });
const artifact = (id: string, text: string) => ({ artifactId: id, name: id, parts: [{ text }] });
const task = (over: Partial<TaskVersion> = {}): TaskVersion => ({
  id: 't1',
  contextId: 'c1',
  state: 'working',
  statusMessage: null,
  history: [],
  artifacts: [],
  metadata: {},
  updatedAt: at,
  ...over,
});

describe('A2A task events', () => {
  it('logs the artifacts a change adds or replaces, then its status; an unchanged artifact is not logged again', () => {
    const before = task({ artifacts: [artifact('a', 'one'), artifact('b', 'two')] });
    const after = task({
      state: 'completed',
      statusMessage: message('done'),
      artifacts: [artifact('a', 'one'), artifact('b', 'TWO'), artifact('c', 'three')],
    });
    const drafts = draftsOf(before, after);
    const events = eventsOf(drafts, after, 7);
    expect(events.map((e) => [e.seq, e.kind])).toEqual([
      [7, 'artifact-update'],
      [8, 'artifact-update'],
      [9, 'status-update'],
    ]);
    expect(events[0].payload).toEqual({
      taskId: 't1',
      contextId: 'c1',
      artifact: artifact('b', 'TWO'),
      append: false,
      lastChunk: true,
    });
    expect(events[2].payload).toEqual({
      taskId: 't1',
      contextId: 'c1',
      status: { state: 'TASK_STATE_COMPLETED', timestamp: at.toISOString(), message: message('done') },
    });
    expect(events.map(stateOfEvent)).toEqual([undefined, undefined, 'completed']);
  });

  it('logs a status update when the state or its message changes, or when the change logs nothing else', () => {
    expect(draftsOf(task(), task({ statusMessage: message('step 2') }))).toEqual({ artifacts: [], status: true });
    expect(draftsOf(task(), task({ artifacts: [artifact('a', 'x')] }))).toEqual({
      artifacts: [artifact('a', 'x')],
      status: false,
    });
    // Nothing the stream shows changed (an agent task id recorded): still one event, so every change leaves a trace.
    expect(draftsOf(task({ statusMessage: message('m') }), task({ statusMessage: message('m') }))).toEqual({
      artifacts: [],
      status: true,
    });
  });

  it("a message or artifact read back from Postgres (jsonb orders keys its own way) is the same as one built from the agent's answer", () => {
    const stored = (v: Record<string, unknown>) => Object.fromEntries(Object.entries(v).reverse());
    const before = task({ statusMessage: stored(message('step 2')), artifacts: [stored(artifact('a', 'forty-'))] });
    const after = task({
      statusMessage: message('step 2'),
      artifacts: [artifact('a', 'forty-'), artifact('b', 'two')],
    });
    expect(draftsOf(before, after)).toEqual({ artifacts: [artifact('b', 'two')], status: false });
    expect([
      sameJson(stored(message('m')), message('m')),
      sameJson(null, undefined),
      sameJson(message('m'), message('n')),
    ]).toEqual([true, true, false]);
  });

  it('begins every log with the task as created (seq 1), which the SDK reads as a Task', () => {
    const created = createdEventOf(task({ state: 'submitted', history: [message('hi')] }));
    expect([created.seq, created.kind, stateOfEvent(created)]).toEqual([1, 'task', 'submitted']);
    const wire = streamResponseOf(created).payload;
    expect(wire?.$case === 'task' && [wire.value.id, wire.value.status?.state, wire.value.history.length]).toEqual([
      't1',
      TaskState.TASK_STATE_SUBMITTED,
      1,
    ]);
    expect(
      StreamResponse.toJSON(streamResponseOf(eventsOf({ artifacts: [], status: true }, task(), 2)[0])),
    ).toHaveProperty('statusUpdate');
  });

  it('reads Last-Event-ID as a seq: absent, a non-negative integer, or refused (null)', () => {
    expect(
      [undefined, '', ' ', '0', '42', ' 7 ', '-1', '1.5', 'x', '1234567890'].map((raw) => parseLastEventId(raw)),
    ).toEqual([undefined, undefined, undefined, 0, 42, 7, null, null, null, null]);
  });
});
