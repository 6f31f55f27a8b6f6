import { newApiKeyCredential } from './api-key-credential';
import { credentialOf, gateHeadersOf, MAX_TOKEN_CHARS } from './bearer-credential';

describe('credentialOf', () => {
  const key = newApiKeyCredential();

  it.each([
    ['nothing', {}, { kind: 'none' }],
    ['a bearer JWT', { authorization: 'Bearer a.b.c' }, { kind: 'jwt', token: 'a.b.c' }],
    ['a bearer JWT, scheme in any case', { authorization: 'bearer a.b.c' }, { kind: 'jwt', token: 'a.b.c' }],
    [
      'a bearer API key',
      { authorization: `Bearer ${key.token}` },
      { kind: 'api-key', key: { id: key.id, secret: key.secret } },
    ],
    ['an x-api-key', { 'x-api-key': key.token }, { kind: 'api-key', key: { id: key.id, secret: key.secret } }],
    ['Basic', { authorization: 'Basic YTpi' }, { kind: 'malformed' }],
    ['Bearer and nothing', { authorization: 'Bearer ' }, { kind: 'malformed' }],
    ['an empty Authorization', { authorization: '' }, { kind: 'malformed' }],
    ['two tokens', { authorization: 'Bearer a.b.c d.e.f' }, { kind: 'malformed' }],
    ['both headers', { authorization: 'Bearer a.b.c', 'x-api-key': key.token }, { kind: 'malformed' }],
    ['an x-api-key that is no key', { 'x-api-key': 'a.b.c' }, { kind: 'malformed' }],
    ['a truncated API key', { authorization: `Bearer ${key.token.slice(0, -1)}` }, { kind: 'malformed' }],
    [
      'an API key with a non-hex id',
      { authorization: `Bearer emk_${'g'.repeat(24)}_${key.secret}` },
      { kind: 'malformed' },
    ],
    [
      'a header sent twice',
      { authorization: ['Bearer a', 'Bearer b'] },
      { kind: 'duplicate', header: 'authorization' },
    ],
    ['x-api-key sent twice', { 'x-api-key': [key.token, key.token] }, { kind: 'duplicate', header: 'x-api-key' }],
    ['an oversized header', { authorization: `Bearer ${'a'.repeat(MAX_TOKEN_CHARS)}` }, { kind: 'malformed' }],
  ])('%s', (_name, headers, expected) => {
    expect(credentialOf(headers)).toMatchObject(expected);
  });
});

describe('gateHeadersOf', () => {
  it("shows a credential header sent twice as both values, which Node's headers object keeps only the first of", () => {
    // What Node's parser makes of `Authorization` twice: the first in `headers`, both in `rawHeaders`.
    const message = {
      headers: { authorization: 'Bearer a.b.c', host: 'x' },
      rawHeaders: ['Host', 'x', 'Authorization', 'Bearer a.b.c', 'authorization', 'Bearer d.e.f'],
    };
    expect(gateHeadersOf(message)).toEqual({ authorization: ['Bearer a.b.c', 'Bearer d.e.f'], host: 'x' });
    expect(credentialOf(gateHeadersOf(message))).toEqual({ kind: 'duplicate', header: 'authorization' });
  });

  it('keeps the headers object of a request that sent each credential header once', () => {
    const message = { headers: { authorization: 'Bearer a.b.c' }, rawHeaders: ['Authorization', 'Bearer a.b.c'] };
    expect(gateHeadersOf(message)).toBe(message.headers);
  });
});
