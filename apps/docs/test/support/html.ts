/** Just enough HTML reading for checking our own generated pages. */

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

export function decode(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|\w+);/gi, (whole, e: string) => {
    if (e[0] === '#') return String.fromCodePoint(e[1]?.toLowerCase() === 'x' ? Number.parseInt(e.slice(2), 16) : Number(e.slice(1)));
    return ENTITIES[e.toLowerCase()] ?? whole;
  });
}

const BLOCK = /<\/?(?:address|article|aside|blockquote|br|caption|dd|details|div|dl|dt|figcaption|figure|footer|h[1-6]|header|hr|li|main|nav|ol|p|pre|section|summary|table|tbody|td|tfoot|th|thead|tr|ul)\b[^>]*>/gi;

/** Visible text: scripts and styles dropped, block tags as breaks, inline tags as nothing, entities decoded, whitespace folded. */
export function textOf(html: string): string {
  return decode(
    html
      .replace(/<(script|style|template)\b[\s\S]*?<\/\1>/gi, ' ')
      .replace(BLOCK, ' ')
      .replace(/<[^>]+>/g, ''),
  )
    .replace(/\s+/g, ' ')
    .trim();
}

/** The page's own content: Starlight's `.sl-markdown-content`, plus the title. */
export function mainContent(html: string): string {
  const start = html.indexOf('<main');
  const end = html.lastIndexOf('</main>');
  return start >= 0 && end > start ? html.slice(start, end) : '';
}

/** The HTML from the `<h2>` with this id up to the next `<h2` (or the end of the content: the page's footer, with its previous/next links, or `</main>`). */
export function section(html: string, id: string): string | undefined {
  const at = html.search(new RegExp(`<h2[^>]*\\bid="${id}"`));
  if (at < 0) return undefined;
  const ends = [html.indexOf('<h2', at + 3), html.indexOf('<footer', at), html.indexOf('</main>', at)].filter((i) => i >= 0);
  return html.slice(at, ends.length > 0 ? Math.min(...ends) : undefined);
}

export function attrValues(html: string, attr: string): string[] {
  return [...html.matchAll(new RegExp(`\\s${attr}="([^"]*)"`, 'g'))].map((m) => decode(m[1]!));
}

export function ids(html: string): Set<string> {
  return new Set(attrValues(html, 'id'));
}

export function h1(html: string): string {
  return textOf(/<h1[^>]*>([\s\S]*?)<\/h1>/.exec(html)?.[1] ?? '');
}
