/** A reason the process cannot start, said in one line; main prints it and exits non-zero, with no stack. */
export class BootError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BootError';
  }
}

/** The most telling short text of an error: a socket code, else the message's first line. */
export function reasonOf(e: unknown): string {
  const err = e as { code?: string; message?: string; cause?: unknown; errors?: unknown[] };
  if (err?.code && typeof err.code === 'string' && /^E[A-Z]+$/.test(err.code)) return err.code;
  if (Array.isArray(err?.errors) && err.errors.length > 0) return reasonOf(err.errors[0]);
  const message = (err?.message ?? String(e)).split('\n')[0];
  if (err?.cause && message.length < 12) return `${message}: ${reasonOf(err.cause)}`;
  return message;
}
