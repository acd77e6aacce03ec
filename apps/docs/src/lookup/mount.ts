import { lookup } from '@kvkit/errors-catalog';

const MAX_RESULTS = 8;

/**
 * The lookup box: the catalog's own `lookup()` (the matcher `kvkit lookup`
 * uses), run in the browser on whatever is pasted or typed.
 * Keys: Enter runs it and moves to the best match, Shift+Enter adds a line,
 * ArrowDown/ArrowUp walk the results, Escape goes back to the box.
 * `?q=` fills the box and runs it on load, and follows every search.
 */
export function mountLookup(root: HTMLElement): void {
  const form = root.querySelector('form')!;
  const box = root.querySelector('textarea')!;
  const list = root.querySelector<HTMLOListElement>('[data-results]')!;
  const status = root.querySelector<HTMLElement>('[data-status]')!;
  const errorsBase = root.dataset.errorsBase!;

  const links = () => [...list.querySelectorAll('a')];

  const run = (): void => {
    const text = box.value.trim();
    const matches = text ? lookup(text, MAX_RESULTS) : [];
    list.replaceChildren(
      ...matches.map(({ entry, score }) => {
        const item = document.createElement('li');
        const link = document.createElement('a');
        link.href = `${errorsBase}${entry.code.toLowerCase()}/`;
        const code = document.createElement('code');
        code.textContent = entry.code;
        link.append(code, ` ${entry.title}${entry.retired ? ' (retired)' : ''}`);
        const rank = document.createElement('span');
        rank.className = 'kv-score';
        rank.textContent = `match ${Math.round(score * 100)}%`;
        item.append(link, rank);
        return item;
      }),
    );
    status.textContent = !text ? '' : matches.length === 0 ? 'No error page matches this message.' : `${matches.length} matching page${matches.length === 1 ? '' : 's'}, best first.`;
    const url = new URL(window.location.href);
    if (text) url.searchParams.set('q', text);
    else url.searchParams.delete('q');
    window.history.replaceState(null, '', url);
  };

  let pending: number | undefined;
  box.addEventListener('input', () => {
    window.clearTimeout(pending);
    pending = window.setTimeout(run, 120);
  });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    window.clearTimeout(pending);
    run();
    links()[0]?.focus();
  });
  box.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    } else if (event.key === 'ArrowDown' && links().length > 0 && box.selectionStart === box.value.length) {
      event.preventDefault();
      links()[0]!.focus();
    }
  });
  list.addEventListener('keydown', (event) => {
    const all = links();
    const at = all.indexOf(document.activeElement as HTMLAnchorElement);
    if (event.key === 'ArrowDown' && at >= 0) {
      event.preventDefault();
      all[Math.min(at + 1, all.length - 1)]!.focus();
    } else if (event.key === 'ArrowUp' && at >= 0) {
      event.preventDefault();
      if (at === 0) box.focus();
      else all[at - 1]!.focus();
    } else if (event.key === 'Escape') {
      box.focus();
    }
  });

  const q = new URLSearchParams(window.location.search).get('q');
  if (q) {
    box.value = q;
    run();
  }
}
