/** One error code, as `explain()` returns it: the contract's skeleton and fixes merged with its prose entry. */
export interface CatalogEntry {
  code: string;
  title: string;
  /** The op whose contract declares the code; `*` for codes every op shares. */
  op: string;
  /** Every op or call that can raise it. */
  raisedBy: string[];
  /** The arguments its checks look at (empty for checks every tensor argument gets). */
  args: string[];
  /** The message template, with `{named}` placeholders. */
  message: string;
  placeholders: string[];
  meaning: string;
  whenItHappens: string;
  situations: string[];
  /** What to do, most likely first: the `fixes` of the code's declaration, as `ContractError.fixes`. */
  solutions: string[];
  /** Runnable TypeScript with `backend` in scope: `before` throws this code, `after` does not. */
  example: { before: string; after: string };
  related: string[];
  /** Wordings of the same condition in the systems this library replaces, so a pasted message finds its page. */
  upstreamMessages: string[];
  /** The declaration in packages/contracts. */
  source: { file: string; line: number };
  retired?: boolean;
}
