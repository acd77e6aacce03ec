/** `KV012` for each usual spelling of a code (`KV012`, `kv012`, `12`); undefined for text that spells none. */
export function canonicalCode(text: string): string | undefined {
  const m = /^\s*(?:kv)?0*(\d{1,3})\s*$/i.exec(text);
  return m ? `KV${m[1]!.padStart(3, '0')}` : undefined;
}
