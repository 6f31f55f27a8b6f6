import { CloudEvent } from 'cloudevents';
import { cloudEventOf } from './events';

describe('cloudEventOf: the runtime’s events as CloudEvents', () => {
  const base = {
    specversion: '1.0',
    id: 'e-1',
    source: '/orders',
    type: 'order.created',
    time: '2026-12-07T10:00:00.000Z',
  };
  const shapes: Record<string, Record<string, unknown>> = {
    'JSON data': { ...base, datacontenttype: 'application/json', data: { orderId: 7, lines: [1, 'two', null] } },
    'every attribute and extensions': {
      ...base,
      subject: 'o-7',
      dataschema: 'https://example.com/s',
      datacontenttype: 'text/plain',
      data: 'plain',
      partitionkey: 'k',
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      ext1: 3,
    },
    'no data': { ...base },
    'extensions before the attributes': { ext1: true, zz: 'last', ...base, data: null },
    'binary data (base64)': { ...base, datacontenttype: 'application/octet-stream', data_base64: 'AAEC/w==' },
    'no time': { specversion: '1.0', id: 'e-2', source: '/s', type: 't', data: 1 },
    'no time, no specversion': { id: 'e-3', source: '/s', type: 't', datacontenttype: 'application/json', data: {} },
    'an empty time': { specversion: '1.0', id: 'e-4', source: '/s', type: 't', time: '', data: 'x' },
  };

  it.each(Object.entries(shapes))('%s: the same event the constructor makes', (_, json) => {
    const made = cloudEventOf(JSON.parse(JSON.stringify(json)) as Record<string, unknown>);
    const expected = new CloudEvent<unknown>(JSON.parse(JSON.stringify(json)) as never, false);
    expect(made).toBeInstanceOf(CloudEvent);
    expect(Object.isFrozen(made)).toBe(true);
    if (!json.time) {
      // The constructor stamps a missing time with the moment it ran: compare the rest.
      expect(new Date(made.time!).getTime()).toBeGreaterThan(Date.now() - 60000);
      expect(Object.keys(made)).toEqual(Object.keys(expected));
      expect({ ...made, time: undefined }).toEqual({ ...expected, time: undefined });
      return;
    }
    // The same own properties in the same order, so toJSON and JSON.stringify write the same text.
    expect(Object.entries(made)).toEqual(Object.entries(expected));
    expect(JSON.stringify(made)).toBe(JSON.stringify(expected));
    expect(made.toJSON()).toEqual(expected.toJSON());
    expect(made.cloneWith({ subject: 'changed' }).subject).toBe('changed');
  });
});
