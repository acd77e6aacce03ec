/** One error code, as `explain()` returns it: the contract's skeleton and fixes merged with its prose entry. */
export interface CatalogEntry {
  /** `KV` and three digits; it keeps its meaning forever. */
  code: string;
  /** One line: what is wrong. */
  title: string;
  /** The op whose contract declares the code; `*` for codes every op shares. */
  op: string;
  /** Every op or call that can raise it. */
  raisedBy: string[];
  /** The arguments its checks look at (empty for checks every tensor argument gets). */
  args: string[];
  /** The message template, with `{named}` placeholders. */
  message: string;
  /** The names of the template's placeholders, in order. */
  placeholders: string[];
  /** What the error means, in Markdown. */
  meaning: string;
  /** When the check runs and what trips it, in Markdown. */
  whenItHappens: string;
  /** The common situations that lead to it, one Markdown line each. */
  situations: string[];
  /** What to do, most likely first: the `fixes` of the code's declaration, as `ContractError.fixes`. */
  solutions: string[];
  /** Runnable TypeScript with `backend` in scope: `before` throws this code, `after` does not. */
  example: { before: string; after: string };
  /** Codes worth reading beside this one. */
  related: string[];
  /** Wordings of the same condition in the systems this library replaces, so a pasted message finds its page. */
  upstreamMessages: string[];
  /** The same wordings with where each was found: `<library>, <repo> <path>, <function or check>`. */
  upstream: { message: string; source?: string }[];
  /** The declaration in packages/contracts. */
  source: { file: string; line: number };
  /** Set on a code no check raises any more: it stays in the catalog, with its page. */
  retired?: boolean;
}
