/** Placeholder names of a message template, in order of first use: `{arg} has shape {actual}` -> arg, actual. */
export function placeholdersOf(template: string): string[] {
  return [...new Set([...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!))];
}
