import { ErrorCode, EventMeshError } from '@libs/errors';

/** An agent's or a Mode 2 session's name: what an ACL rule's pattern matches, within the caller's tenant. */
export const SESSION_NAME = /^[A-Za-z0-9._-]{1,128}$/;
/** The part of a session id after `<name>:` that makes it unique: a UUID, or any 8 to 64 of [A-Za-z0-9_-]. */
const SUFFIX = /^[A-Za-z0-9_-]{8,64}$/;

/** Throws 400 INVALID_REQUEST for a name that is not one. */
export function checkName(name: string, what: 'agent' | 'session'): string {
  if (!SESSION_NAME.test(name))
    throw new EventMeshError(ErrorCode.InvalidRequest, `${what} name: 1 to 128 characters of [A-Za-z0-9._-]`, {
      field: what,
    });
  return name;
}

/**
 * The name a session id names: `<agent>:<uuid>` (Mode 1) or `<session name>:<uuid>` (a Mode 2 subscription or
 * publisher), so opening one needs no lookup beyond its name. Throws 400 INVALID_REQUEST for anything else.
 */
export function nameOfSessionId(id: string, what: 'agent' | 'session' = 'agent'): string {
  const at = id.indexOf(':');
  if (at <= 0 || !SUFFIX.test(id.slice(at + 1)))
    throw new EventMeshError(ErrorCode.InvalidRequest, `session id: <${what} name>:<uuid>`, { field: 'id' });
  return checkName(id.slice(0, at), what);
}
