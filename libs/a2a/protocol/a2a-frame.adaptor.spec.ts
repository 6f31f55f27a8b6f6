import { SendMessageRequest } from '@a2a-js/sdk';
import { frameFromKafkaRecord, frameToKafkaMessage } from '@libs/frame';
import { A2A_TASK_FRAME_TYPE, a2aTaskAdaptor, NotATaskFrame, taskFromFrame, taskToFrame } from './a2a-frame.adaptor';
import { isAgentTopic, requestTopicOf } from '../relay/request-topic';

describe('A2A frame adaptor', () => {
  const request = SendMessageRequest.fromJSON({
    tenant: 'ignored',
    message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'echo:hi' }], taskId: '', contextId: '' },
    configuration: { returnImmediately: true, historyLength: 2 },
    metadata: { k: 'v' },
  });
  const ids = { taskId: 't-1', contextId: 'c-1', agent: 'echo' };

  it('turns a SendMessage into a frame with the mesh ids, and back, through the Kafka record codec', () => {
    const frame = taskToFrame(ids, request, new Date('2026-01-01T00:00:00Z'));
    expect(frame).toMatchObject({
      id: 't-1',
      type: A2A_TASK_FRAME_TYPE,
      source: '/a2a/agents/echo',
      extensions: { a2ataskid: 't-1', partitionkey: 't-1' },
    });
    const record = frameToKafkaMessage(frame);
    expect(record.key).toBe('t-1');
    const back = taskFromFrame(frameFromKafkaRecord(record.headers, record.value as Buffer));
    expect(back).toMatchObject({ taskId: 't-1', contextId: 'c-1', agent: 'echo' });
    expect(back.request.message).toMatchObject({ messageId: 'm1', taskId: 't-1', contextId: 'c-1' });
    expect(back.request.tenant).toBe('');
    expect(back.request.configuration?.historyLength).toBe(2);
    expect(back.request.metadata).toEqual({ k: 'v' });
  });

  it('on the frame SPI: a task message decodes straight to its frame (no CloudEvents attribute), a frame encodes as its A2A JSON', () => {
    const time = new Date('2026-01-01T00:00:00Z');
    const [frame] = a2aTaskAdaptor.decode({ ids, request, time, turn: 2 });
    expect(frame).toEqual(taskToFrame(ids, request, time, 2));
    expect(frame).not.toHaveProperty('specversion');
    expect(frame.id).toBe('t-1.2');
    const encoded = a2aTaskAdaptor.encode(frame);
    expect(encoded.headers).toEqual({ 'content-type': 'application/a2a+json' });
    expect(SendMessageRequest.fromJSON(JSON.parse(encoded.body!.toString())).message).toMatchObject({
      messageId: 'm1',
      taskId: 't-1',
      contextId: 'c-1',
    });
  });

  it('refuses a frame that is not a task frame', () => {
    const frame = taskToFrame(ids, request, new Date());
    expect(() => taskFromFrame({ ...frame, type: 'other' })).toThrow(NotATaskFrame);
    expect(() => taskFromFrame({ ...frame, data: Buffer.from('{') })).toThrow(NotATaskFrame);
  });

  it('names request topics per tenant and agent, unambiguously', () => {
    expect(requestTopicOf('acme', 'echo.v2')).toBe('a2a.acme.echo.v2.requests');
    expect(requestTopicOf('a.b', 'c')).toMatch(/^a2a\.x-[0-9a-f]{16}\.c\.requests$/);
    expect(requestTopicOf('x-1', 'c')).not.toBe('a2a.x-1.c.requests');
    expect(isAgentTopic(requestTopicOf('a b', 'c'))).toBe(true);
    expect(isAgentTopic('a2a.acme.requests')).toBe(false);
  });
});
