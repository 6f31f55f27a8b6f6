import { EventMeshError } from '@libs/errors';
import { cursorAfter, parseBrowseQuery, parsePurgeQuery, parseReplayRequest } from './dead-letter-query';

const refusal = (f: () => unknown): { code: string; field: unknown } => {
  try {
    f();
  } catch (e) {
    if (e instanceof EventMeshError) return { code: e.code, field: e.details.field };
    throw e;
  }
  throw new Error('accepted');
};

describe('dead-letter request parsing', () => {
  it('reads the filters and the page of a browse, instants normalised', () => {
    expect(
      parseBrowseQuery({
        type: 'a',
        source: '/s',
        from: '2026-12-01T00:00:00+01:00',
        httpStatus: '503',
        state: 'all',
        limit: '10',
        cursor: cursorAfter('42'),
      }),
    ).toEqual({
      filter: { type: 'a', source: '/s', from: '2026-11-30T23:00:00.000Z', httpStatus: 503, state: 'all' },
      limit: 10,
      afterId: '42',
    });
    expect(parseBrowseQuery({})).toEqual({ filter: {}, limit: 100, afterId: undefined });
  });

  it.each([
    [{ from: 'monday' }, 'from'],
    [{ from: '2026-12-02T00:00:00Z', to: '2026-12-01T00:00:00Z' }, 'to'],
    [{ limit: '-1' }, 'limit'],
    [{ limit: '1001' }, 'limit'],
    [{ httpStatus: '700' }, 'httpStatus'],
    [{ state: 'REPLAYED' }, 'state'],
    [{ cursor: Buffer.from('{"after":"x"}').toString('base64url') }, 'cursor'],
    [{ since: 'x' }, 'since'],
  ])('refuses the browse query %j naming %s', (query, field) => {
    expect(refusal(() => parseBrowseQuery(query))).toEqual({ code: 'INVALID_REQUEST', field });
  });

  it('asks a purge for the subscription id as confirmation', () => {
    expect(refusal(() => parsePurgeQuery({}, 'sub-1'))).toEqual({ code: 'CONFIRMATION_REQUIRED', field: 'confirm' });
    expect(refusal(() => parsePurgeQuery({ confirm: 'true' }, 'sub-1'))).toEqual({
      code: 'CONFIRMATION_REQUIRED',
      field: 'confirm',
    });
    expect(parsePurgeQuery({ confirm: 'sub-1', type: 't' }, 'sub-1')).toEqual({ type: 't' });
  });

  it('takes ids or a filter for a replay, not both and not neither, at a bounded rate', () => {
    expect(parseReplayRequest({ ids: ['7', '7', '9'] })).toEqual({
      selection: { ids: ['7', '9'] },
      ratePerSecond: undefined,
    });
    expect(parseReplayRequest({ filter: {}, ratePerSecond: 1000 })).toEqual({
      selection: { filter: {} },
      ratePerSecond: 1000,
    });
    expect(refusal(() => parseReplayRequest({}))).toEqual({ code: 'INVALID_REQUEST', field: 'ids' });
    expect(refusal(() => parseReplayRequest({ ids: ['1'], filter: {} }))).toEqual({
      code: 'INVALID_REQUEST',
      field: 'ids',
    });
    expect(refusal(() => parseReplayRequest({ ids: ['01'] }))).toEqual({ code: 'INVALID_REQUEST', field: 'ids.0' });
    expect(refusal(() => parseReplayRequest({ filter: {}, ratePerSecond: 0 }))).toEqual({
      code: 'INVALID_REQUEST',
      field: 'ratePerSecond',
    });
    expect(refusal(() => parseReplayRequest({ filter: { state: 'all' } }))).toEqual({
      code: 'INVALID_REQUEST',
      field: 'state',
    });
  });
});
