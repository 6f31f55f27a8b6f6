import type { OpenApiDocument } from './openapi';

const escape = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * `/docs`: the API document as a plain HTML page, made on the server from the same document (no script, nothing
 * fetched from elsewhere): each route with its summary, parameters and statuses, grouped by tag. The full schemas
 * are in `/openapi.json`, for any OpenAPI tool.
 */
export function openApiPage(document: OpenApiDocument): string {
  const byTag = new Map<string, string[]>();
  for (const [path, operations] of Object.entries(document.paths)) {
    for (const [method, op] of Object.entries(operations)) {
      const params = (op.parameters ?? [])
        .map((p) => `<code>${escape(String(p.name))}</code> (${escape(String(p.in))})`)
        .join(', ');
      const statuses = Object.entries(op.responses)
        .map(([status, r]) => `<span title="${escape(r.description)}">${escape(status)}</span>`)
        .join(' ');
      const body = op.requestBody
        ? Object.keys((op.requestBody.content as object) ?? {})
            .map(escape)
            .join(', ')
        : '';
      const row =
        `<tr><td><b>${escape(method.toUpperCase())}</b></td><td><code>${escape(path)}</code></td><td>${escape(op.summary)}` +
        `${op['x-eventmesh-internal'] ? ' <i>(internal)</i>' : ''}</td><td>${params}</td><td>${body}</td><td>${statuses}</td></tr>`;
      for (const tag of op.tags) byTag.set(tag, [...(byTag.get(tag) ?? []), row]);
    }
  }
  const sections = [...byTag.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(
      ([tag, rows]) =>
        `<h2>${escape(tag)}</h2><table><tr><th>method</th><th>path</th><th>summary</th><th>parameters</th><th>body</th><th>statuses</th></tr>${rows.join('')}</table>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(document.info.title)} API</title>
<style>body{font-family:sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.3em .5em;text-align:left;vertical-align:top}code{font-size:.95em}</style>
</head><body>
<h1>${escape(document.info.title)} API ${escape(document.info.version)}</h1>
<p>${escape(document.info.description)}</p>
<p>The machine-readable document, with every request and response schema: <a href="/openapi.json">/openapi.json</a> (OpenAPI ${escape(document.openapi)}).</p>
${sections}
</body></html>
`;
}
