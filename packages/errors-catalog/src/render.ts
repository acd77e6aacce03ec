/** Fills `{name}` placeholders; arrays print as `[2, 4]`, missing values as `{name}` so a gap shows. */
export function render(template: string, values: Readonly<Record<string, unknown>>): string {
  return template.replace(/\{(\w+)\}/g, (whole, name: string) => (name in values ? formatValue(values[name]) : whole));
}

export function formatValue(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(formatValue).join(', ')}]`;
  if (typeof v === 'bigint') return v.toString();
  return String(v);
}
