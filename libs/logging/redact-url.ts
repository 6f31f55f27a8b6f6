/**
 * A URL as a log line may show it: without its userinfo (`user:password@`) and with every query value replaced by
 * `REDACTED` (the names stay, so an operator still sees which parameters a sink takes), and without its fragment.
 * Sink URLs are tenants' data and often carry a token in the query (`?token=...`), and log lines travel further
 * than the database does. Something that is not a URL is not shown at all: it may be a secret mistyped.
 */
export function redactUrl(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return '(not a URL)';
  }
  url.username = '';
  url.password = '';
  url.hash = '';
  if (url.search !== '') {
    const names = [...url.searchParams.keys()];
    url.search = names.map((name) => `${encodeURIComponent(name)}=REDACTED`).join('&');
  }
  return url.toString();
}
