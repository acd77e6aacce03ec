/** Fills `{name}` placeholders; arrays print as `[2, 4]`, missing values as `{name}` so a gap shows. */
export function render(template: string, values: Readonly<Record<string, unknown>>): string {
  return template.replace(/\{(\w+)\}/g, (whole, name: string) => (name in values ? formatValue(values[name]) : whole));
}

/** Never throws: a value whose own conversion fails prints as its tag, `[object Object]`. */
export function formatValue(v: unknown): string {
  if (Array.isArray(v)) return `[${Array.from(v, formatValue).join(', ')}]`;
  try {
    return String(v);
  } catch {
    return Object.prototype.toString.call(v);
  }
}
