/** SQLSTATE classes and codes that say Postgres could not serve the request now, not that the request was wrong. */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '53400']);
const UNAVAILABLE_NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/**
 * True when `e` is Postgres being unreachable, restarting or shutting down (a connection exception, SQLSTATE class
 * 08; an administrator shutdown or a server not yet accepting connections, 57P01-57P03; too many connections), or
 * the pool's connection dropping under a query: what a caller may retry. A query error (a constraint, a syntax
 * error) is not.
 */
export function isPostgresUnavailable(e: unknown): boolean {
  const errors = [e, (e as { driverError?: unknown })?.driverError].filter(
    (x): x is { code?: unknown; message?: unknown } => typeof x === 'object' && x !== null,
  );
  return errors.some((x) => {
    const code = typeof x.code === 'string' ? x.code : '';
    if (code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code) || UNAVAILABLE_NETWORK_CODES.has(code)) return true;
    const message = typeof x.message === 'string' ? x.message : '';
    return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/.test(
      message,
    );
  });
}
