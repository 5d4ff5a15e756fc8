/**
 * A browsable page of an OpenAPI document (GET /api/v1/docs), rendered on the server with no
 * script and nothing fetched from elsewhere: every endpoint with its summary, parameters,
 * request schema and responses (with their body schemas). Every text is HTML-escaped.
 */
type Json = Record<string, any>;

const escape = (value: unknown) =>
  String(value).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function resolve(doc: Json, schema: Json | undefined): Json | undefined {
  const ref = schema?.$ref as string | undefined;
  return ref ? doc.components?.schemas?.[ref.split('/').pop()!] : schema;
}

function operation(doc: Json, path: string, method: string, op: Json): string {
  const params = (op.parameters ?? []) as Json[];
  const body = op.requestBody?.content as Json | undefined;
  const responses = Object.entries((op.responses ?? {}) as Json);
  return `<section>
<h3><code>${escape(method.toUpperCase())} ${escape(path)}</code></h3>
${op.summary ? `<p><strong>${escape(op.summary)}</strong></p>` : ''}${op.description ? `<p>${escape(op.description)}</p>` : ''}
${params.length ? `<p>Parameters: ${params.map((p) => `<code>${escape(p.name)}</code> (${escape(p.in)}${p.required ? ', required' : ''})`).join(', ')}</p>` : ''}
${body ? Object.entries(body).map(([type, content]) => `<details><summary>Request body: ${escape(type)}</summary><pre>${escape(JSON.stringify(resolve(doc, (content as Json).schema), null, 2))}</pre></details>`).join('\n') : ''}
<ul>${responses.map(([status, response]) => `<li><code>${escape(status)}</code> ${escape((response as Json).description ?? '')}${responseBody(doc, response as Json)}</li>`).join('')}</ul>
</section>`;
}

/** A success response's body schema (errors all share one shape, shown once under components). */
function responseBody(doc: Json, response: Json): string {
  const schema = response.content?.['application/json']?.schema as Json | undefined;
  if (!schema || schema.$ref === '#/components/schemas/Error') return '';
  return `<details><summary>Body</summary><pre>${escape(JSON.stringify(resolve(doc, schema), null, 2))}</pre></details>`;
}

export function renderApiDocs(doc: Json): string {
  const title = escape(doc.info?.title ?? 'API');
  const sections = Object.entries((doc.paths ?? {}) as Json).flatMap(([path, methods]) =>
    Object.entries(methods as Json).map(([method, op]) => operation(doc, path, method, op as Json)),
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title}</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}section{border-top:1px solid #ddd;padding:.5rem 0}pre{background:#f6f6f6;padding:.5rem;overflow:auto}</style>
</head><body>
<h1>${title} <small>${escape(doc.info?.version ?? '')}</small></h1>
<p>${escape(doc.info?.description ?? '')} Machine-readable: <a href="/api/v1/openapi.json">/api/v1/openapi.json</a>.</p>
${sections.join('\n')}
</body></html>
`;
}
