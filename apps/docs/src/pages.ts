import type { OpDecl } from '@kvkit/contracts';
import type { CatalogEntry } from '@kvkit/errors-catalog';

/** The site as path -> HTML, every page generated from the catalog and the op contracts; links are relative, so any base path serves it. */
export function buildSite(entries: readonly CatalogEntry[], ops: readonly OpDecl[]): Map<string, string> {
  const pages = new Map<string, string>();
  const codeLink = (code: string, depth: number) => `<a href="${'../'.repeat(depth)}errors/${code.toLowerCase()}/"><code>${code}</code></a>`;
  pages.set(
    'index.html',
    page('kvkit errors', 0, [
      '<h1>kvkit error index</h1>',
      '<p>Every error kvkit raises has a code. Run <code>kvkit explain KV012</code>, or find the page for a pasted message with <code>kvkit lookup "&lt;message&gt;"</code>.</p>',
      `<ul>${entries.map((e) => `<li>${codeLink(e.code, 0)} ${esc(e.title)}</li>`).join('')}</ul>`,
      '<h2>Ops</h2>',
      `<ul>${ops.map((o) => `<li><a href="ops/${slug(o.name)}/">${esc(o.name)}</a>: ${esc(o.summary)}</li>`).join('')}</ul>`,
    ]),
  );
  for (const e of entries) {
    pages.set(
      `errors/${e.code.toLowerCase()}/index.html`,
      page(`${e.code}: ${e.title}`, 2, [
        `<h1><code>${e.code}</code> ${esc(e.title)}</h1>`,
        `<p>Raised by ${e.raisedBy.map((o) => `<code>${esc(o)}</code>`).join(', ')}.</p>`,
        `<h2>Error message</h2><pre>${esc(e.message).replace(/\{(\w+)\}/g, '<var>{$1}</var>')}</pre>`,
        `<h2>What it means</h2>${paras(e.meaning)}`,
        `<h2>Source</h2><p>Declared in <code>${esc(e.source.file)}</code>, line ${e.source.line}.</p>`,
        `<h2>Solutions</h2><ol>${e.solutions.map((s) => `<li>${esc(s)}</li>`).join('')}</ol>`,
        `<h2>Example fix</h2><h3>Before (throws ${e.code})</h3><pre><code class="language-ts">${esc(e.example.before)}</code></pre><h3>After</h3><pre><code class="language-ts">${esc(e.example.after)}</code></pre>`,
        `<h2>When it happens</h2>${paras(e.whenItHappens)}<ul>${e.situations.map((s) => `<li>${esc(s)}</li>`).join('')}</ul>`,
        `<h2>Related errors</h2><ul>${e.related.map((r) => `<li>${codeLink(r, 2)}</li>`).join('')}</ul>`,
      ]),
    );
  }
  for (const op of ops) {
    const codes = entries.filter((e) => e.raisedBy.includes(op.name));
    pages.set(
      `ops/${slug(op.name)}/index.html`,
      page(op.name, 2, [
        `<h1><code>${esc(op.name)}</code></h1>`,
        `<p>${esc(op.summary)}</p>`,
        `<h2>Dims</h2><table><tr><th>dim</th><th>meaning</th></tr>${Object.entries(op.dims)
          .map(([d, m]) => `<tr><td><code>${d}</code></td><td>${esc(m)}</td></tr>`)
          .join('')}</table>`,
        `<h2>Errors it can raise</h2><ul>${codes.map((e) => `<li>${codeLink(e.code, 2)} ${esc(e.title)}</li>`).join('')}</ul>`,
      ]),
    );
  }
  return pages;
}

const slug = (name: string) => name.replace(/\./g, '-');
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const paras = (s: string) => s.split('\n\n').map((p) => `<p>${esc(p)}</p>`).join('');

function page(title: string, depth: number, body: string[]): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)} · kvkit</title></head><body><nav><a href="${'../'.repeat(depth) || './'}">kvkit errors</a></nav><main>${body.join('\n')}</main></body></html>\n`;
}
