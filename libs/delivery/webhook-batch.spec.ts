import { EventFrame, frameToStructured } from '@libs/frame';
import { batchBodyOf, batchBytesOf, batchEntryOf } from './webhook-batch';

describe('batch entries', () => {
  const frame = (datacontenttype: string | undefined, data?: string | Buffer): EventFrame => ({
    id: 'e"1',
    source: '/s',
    type: 't',
    subject: 'sub\n',
    time: '2026-12-06T00:00:00Z',
    datacontenttype,
    extensions: { partitionkey: 'k', count: 3, flag: true },
    data: data === undefined ? undefined : Buffer.from(data),
    requestId: 'not-an-attribute',
  });

  it.each([
    ['JSON data, carried as its own bytes', frame('application/json', ' {"a": [1, 2]} ')],
    ['JSON data of a +json type', frame('application/cloudevents+json', '"x"')],
    ['JSON data without a content type', frame(undefined, '{"b":null}')],
    ['JSON data, attributes beyond ASCII', { ...frame('application/json', '{"é":1}'), source: '/sé☃', subject: '😀' }],
    ['JSON-typed data that does not parse', frame('application/json', '{not json')],
    ['text data', frame('text/plain', 'hé "quoted"')],
    ['binary data', frame('application/octet-stream', Buffer.from([0, 255, 7]))],
    ['no data', frame('application/json')],
  ])('%s: the structured event frameToStructured gives', (_, f) => {
    expect(JSON.parse(batchEntryOf(f).toString('utf8'))).toEqual(frameToStructured(f));
  });

  it('joins entries into one JSON array of the size batchBytesOf counts', () => {
    const entries = [batchEntryOf(frame('text/plain', 'a')), batchEntryOf(frame('application/json', '[1]'))];
    const body = batchBodyOf(entries);
    expect(JSON.parse(body.toString('utf8'))).toHaveLength(2);
    expect(body.length).toBe(batchBytesOf(entries[0].length + entries[1].length, 2));
  });
});
