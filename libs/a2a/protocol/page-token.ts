import { RequestMalformedError } from '@a2a-js/sdk/errors';

/**
 * The page tokens of the mesh's A2A listings (ListTasks, ListTaskPushNotificationConfigs): opaque to clients, the
 * id of the last item of the page, base64url JSON.
 */
export function encodePageToken(id: string): string {
  return Buffer.from(JSON.stringify({ after: id })).toString('base64url');
}

/** The id a page token names; a token the mesh did not issue is refused as malformed (-32602). */
export function decodePageToken(token: string): string {
  try {
    const decoded = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { after?: unknown };
    if (typeof decoded.after === 'string' && decoded.after !== '') return decoded.after;
  } catch {
    // falls through to the refusal
  }
  throw new RequestMalformedError('pageToken: not a token this server issued');
}
