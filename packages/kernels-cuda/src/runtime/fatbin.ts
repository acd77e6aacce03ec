import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/** The file the package build writes with nvcc: machine code for sm_80 and sm_90, and compute_90 PTX. */
export const FATBIN_NAME = 'kvkit.fatbin';

/**
 * Where the fatbin may be, in order: the option, KVKIT_CUDA_FATBIN, next to
 * dist/ (the installed package), the directory of this module (a bundle with
 * the fatbin copied beside it), and dist/ seen from src/ (tests of the sources).
 */
export function fatbinCandidates(explicit: string | undefined): string[] {
  if (explicit !== undefined) return [explicit];
  const fromEnv = process.env.KVKIT_CUDA_FATBIN;
  if (fromEnv) return [fromEnv];
  const near = (relative: string) => fileURLToPath(new URL(relative, import.meta.url));
  return [...new Set([near(`../${FATBIN_NAME}`), near(`./${FATBIN_NAME}`), near(`../../dist/${FATBIN_NAME}`)])];
}

/** The fatbin's bytes, or every place it was looked for. */
export async function loadFatbin(explicit: string | undefined): Promise<{ path: string; image: Buffer } | { looked: string[] }> {
  const looked = fatbinCandidates(explicit);
  for (const path of looked) {
    try {
      return { path, image: await readFile(path) };
    } catch {
      // not there: try the next place
    }
  }
  return { looked };
}
