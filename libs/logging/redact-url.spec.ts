import { configureLogging, createLogger } from './logger';
import { redactUrl } from './redact-url';

describe('redactUrl', () => {
  it.each([
    ['http://user:s3cr3t@hooks.example.test/x', 'http://hooks.example.test/x'],
    [
      'https://hooks.example.test/x?token=s3cr3t&region=eu',
      'https://hooks.example.test/x?token=REDACTED&region=REDACTED',
    ],
    ['https://u@hooks.example.test:8443/x?token=s3cr3t#frag', 'https://hooks.example.test:8443/x?token=REDACTED'],
    ['http://hooks.example.test/x', 'http://hooks.example.test/x'],
    ['not a url s3cr3t', '(not a URL)'],
  ])('%s', (raw, shown) => {
    expect(redactUrl(raw)).toBe(shown);
  });
});

describe('the loggers', () => {
  afterEach(() => {
    jest.restoreAllMocks();
    configureLogging('error', {}, 'silent');
  });

  it('redact a sink URL wherever it is logged as `sink`: no userinfo, no query values', () => {
    const written: string[] = [];
    jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    // The pretty format writes through process.stdout.write, synchronously: what a line says can be read here.
    configureLogging('info', {}, 'silent', 'pretty');
    createLogger('SubscriptionService').info(
      { subscription: 's-1', sink: 'https://user:pw-s3cr3t@hooks.example.test/in?token=tok-s3cr3t' },
      'subscription created',
    );
    const line = written.join('');
    expect(line).toContain('https://hooks.example.test/in?token=REDACTED');
    expect(line).not.toMatch(/s3cr3t|user/);
  });
});
