import type { Part } from '@a2a-js/sdk';
import { ContentTypeNotSupportedError } from '@a2a-js/sdk/errors';
import type { RegisteredCard } from './agent-card';

/**
 * What a message may carry to an agent: the media types its card accepts (`defaultInputModes`, and each skill's
 * `inputModes`, since a message does not say which skill it is for). A part the agent accepts none of is refused
 * with ContentTypeNotSupportedError (-32005) before anything is stored or sent.
 *
 * - A part's media type is its `mediaType`; without one, a text part is `text/plain` and a data part
 *   `application/json` (what they are on the wire); a file (bytes or URL) without one is not checked, since
 *   nothing says what it is.
 * - A mode matches a media type exactly (case and parameters ignored), as `type/*` (any subtype), or as `*` or
 *   `*` + `/*` (anything). A mode that is not a media type is matched as a kind, as cards of earlier A2A versions
 *   wrote them: `text` (text parts, and any `text/` type), `data` (data parts), `file` (file parts).
 * - A card that names no mode at all accepts anything (the agent did not say).
 */
export function checkInputModes(
  parts: readonly Part[],
  card: Pick<RegisteredCard, 'defaultInputModes' | 'skills'>,
): void {
  const modes = [...card.defaultInputModes, ...card.skills.flatMap((s) => s.inputModes ?? [])]
    .map(normalize)
    .filter((m) => m !== '');
  if (modes.length === 0) return;
  parts.forEach((part, i) => {
    const kind = kindOf(part);
    const mediaType = normalize(part.mediaType) || IMPLIED[kind];
    if (mediaType === undefined && kind === 'file') return;
    if (modes.some((mode) => accepts(mode, kind, mediaType))) return;
    const unique = [...new Set(modes)];
    throw new ContentTypeNotSupportedError(
      `message.parts.${i}: ${mediaType ? `media type ${mediaType}` : `a ${kind} part`} is not among the agent's input modes (${unique.join(', ')})`,
    );
  });
}

type Kind = 'text' | 'data' | 'file';

const IMPLIED: Partial<Record<Kind, string>> = { text: 'text/plain', data: 'application/json' };

function kindOf(part: Part): Kind {
  const c = part.content?.$case;
  return c === 'text' ? 'text' : c === 'data' ? 'data' : 'file';
}

/** `Text/Plain; charset=utf-8` -> `text/plain`. */
function normalize(mediaType: string | undefined): string {
  return (mediaType ?? '').split(';')[0].trim().toLowerCase();
}

function accepts(mode: string, kind: Kind, mediaType: string | undefined): boolean {
  if (mode === '*' || mode === '*/*') return true;
  if (!mode.includes('/')) return mode === kind || (mediaType !== undefined && mediaType.startsWith(`${mode}/`));
  if (mediaType === undefined) return false;
  if (mode.endsWith('/*')) return mediaType.startsWith(mode.slice(0, -1));
  return mode === mediaType;
}
