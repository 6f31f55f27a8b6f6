import { RequestMalformedError } from '@a2a-js/sdk/errors';
import { ErrorCode, EventMeshError } from '@libs/errors';
import { checkPushUrl, pushConfigInputOf, toWirePushConfig, wireVersionOf } from './push-configs';

const config = (over: Record<string, unknown> = {}) => ({
  tenant: '',
  id: 'c1',
  taskId: 't1',
  url: 'https://hooks.example.com/a2a',
  token: '',
  authentication: undefined,
  ...over,
});

describe('push notification configs', () => {
  it('takes an http(s) URL, the token, and a whole authentication', () => {
    expect(pushConfigInputOf(config({ token: 'tok' }), '1.0')).toEqual({
      id: 'c1',
      url: 'https://hooks.example.com/a2a',
      token: 'tok',
      authentication: null,
      wireVersion: '1.0',
    });
    expect(pushConfigInputOf(config({ authentication: { scheme: 'Bearer', credentials: 'x' } }), '0.3')).toMatchObject({
      token: null,
      authentication: { scheme: 'Bearer', credentials: 'x' },
      wireVersion: '0.3',
    });
    expect(pushConfigInputOf(config({ id: '' }), '1.0').id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it.each([
    ['no URL', { url: '' }, 'url'],
    ['not a URL', { url: 'hooks' }, 'url: not a URL'],
    ['another scheme', { url: 'ftp://hooks.example.com/' }, 'http or https'],
    ['credentials in the URL', { url: 'https://u:p@hooks.example.com/' }, 'no credentials'],
    ['an id with a slash', { id: 'a/b' }, 'id'],
    [
      'a scheme without credentials',
      { authentication: { scheme: 'Bearer', credentials: '' } },
      'both scheme and credentials',
    ],
    ['a token of two lines', { token: 'a\r\nX-Evil: 1' }, 'token'],
  ])('refuses %s with -32602', (_, over, message) => {
    expect(() => pushConfigInputOf(config(over), '1.0')).toThrow(RequestMalformedError);
    expect(() => pushConfigInputOf(config(over), '1.0')).toThrow(message);
  });

  it('answers a URL the sink rules refuse with -32602, other failures as they are', async () => {
    await expect(
      checkPushUrl(
        () => Promise.reject(new EventMeshError(ErrorCode.SinkNotAllowed, 'sink: private address')),
        'http://x/',
      ),
    ).rejects.toThrow(new RequestMalformedError('url: sink: private address'));
    const down = new Error('resolver down');
    await expect(checkPushUrl(() => Promise.reject(down), 'http://x/')).rejects.toBe(down);
  });

  it('reads the version from the A2A-Version header (absent: 0.3) and shows a stored config as the A2A config', () => {
    expect([wireVersionOf('1.0'), wireVersionOf('0.3'), wireVersionOf(undefined)]).toEqual(['1.0', '0.3', '0.3']);
    const stored = {
      taskId: 't1',
      id: 'c1',
      tenant: 'x',
      url: 'https://h/',
      token: null,
      authentication: null,
      wireVersion: '1.0' as const,
      pushedVersion: 3,
      createdAt: new Date(),
    };
    expect(toWirePushConfig(stored)).toEqual({
      tenant: '',
      id: 'c1',
      taskId: 't1',
      url: 'https://h/',
      token: '',
      authentication: undefined,
    });
  });
});
