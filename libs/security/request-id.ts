import { randomUUID } from 'node:crypto';

const USABLE = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request's `x-request-id` when it sent a usable one (so a caller can find its request in the audit), else a fresh one. */
export function requestIdOf(headers: Record<string, string | string[] | undefined>): string {
  const sent = headers['x-request-id'];
  return typeof sent === 'string' && USABLE.test(sent) ? sent : randomUUID();
}
