import { Part } from '@a2a-js/sdk';
import { ContentTypeNotSupportedError } from '@a2a-js/sdk/errors';
import { checkInputModes } from './input-modes';

const text = (value: string, mediaType = ''): Part => ({
  content: { $case: 'text', value },
  metadata: undefined,
  filename: '',
  mediaType,
});
const data = (value: unknown, mediaType = ''): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType,
});
const file = (mediaType = ''): Part => ({
  content: { $case: 'url', value: 'https://files.example/a' },
  metadata: undefined,
  filename: 'a',
  mediaType,
});
const card = (defaultInputModes: string[], skillModes?: string[]) => ({
  defaultInputModes,
  skills: [{ id: 's', name: 'S', description: 'd', tags: [], ...(skillModes ? { inputModes: skillModes } : {}) }],
});

describe('checkInputModes', () => {
  it('accepts parts whose media type (given or implied) a mode names exactly, ignoring case and parameters', () => {
    expect(() =>
      checkInputModes([text('hi'), text('hi', 'Text/Plain; charset=utf-8')], card(['text/plain'])),
    ).not.toThrow();
    expect(() => checkInputModes([data({ a: 1 })], card(['application/json']))).not.toThrow();
  });

  it('refuses a part no mode accepts with -32005, naming the part, its media type and the modes', () => {
    const refuse = (parts: Part[], modes: string[]) => {
      try {
        checkInputModes(parts, card(modes));
      } catch (e) {
        expect(e).toBeInstanceOf(ContentTypeNotSupportedError);
        return (e as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refuse([text('hi'), file('image/png')], ['text/plain'])).toBe(
      "message.parts.1: media type image/png is not among the agent's input modes (text/plain)",
    );
    expect(refuse([data({})], ['text/plain', 'text/plain'])).toBe(
      "message.parts.0: media type application/json is not among the agent's input modes (text/plain)",
    );
    expect(refuse([text('hi')], ['application/pdf'])).toContain('media type text/plain');
  });

  it("takes the skills' input modes too, and wildcards", () => {
    expect(() => checkInputModes([file('image/png')], card(['text/plain'], ['image/png']))).not.toThrow();
    expect(() => checkInputModes([file('image/webp')], card(['image/*']))).not.toThrow();
    expect(() => checkInputModes([file('application/pdf')], card(['image/*']))).toThrow(ContentTypeNotSupportedError);
    expect(() => checkInputModes([file('application/pdf'), data(1)], card(['*/*']))).not.toThrow();
    expect(() => checkInputModes([file('application/pdf')], card(['*']))).not.toThrow();
  });

  it('matches the kinds earlier cards named (text, data, file)', () => {
    expect(() => checkInputModes([text('hi'), file('text/csv')], card(['text']))).not.toThrow();
    expect(() => checkInputModes([data({})], card(['text']))).toThrow(ContentTypeNotSupportedError);
    expect(() => checkInputModes([data({}), file('application/pdf')], card(['data', 'file']))).not.toThrow();
  });

  it('does not check a file without a media type, nor any part when the card names no mode', () => {
    expect(() => checkInputModes([file()], card(['text/plain']))).not.toThrow();
    expect(() => checkInputModes([file('image/png'), data({})], card([]))).not.toThrow();
  });
});
