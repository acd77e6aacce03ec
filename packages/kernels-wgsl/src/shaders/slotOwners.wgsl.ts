/**
 * The ownership pass before a pool scatter (SEMANTICS.md §3: of the tokens
 * naming one slot in a call, exactly one writes it, the one the contract's
 * rule names). Two dispatches over the tokens, both O(N):
 *
 *  claim    every token with a slot in the pool raises owners[slot] to its
 *           token + 1 with atomicMax (rule 'last': the highest token wins).
 *  resolve  every token copies its slot into `owned`, the slot list the
 *           scatter reads, except that a token that does not own its slot
 *           gets -1 there (skipped). The owner sets owners[slot] back to 0
 *           as it goes: a token still to look sees 0 or the owner's mark,
 *           neither its own, so the table is all zero again after the call
 *           without a pass over its S entries.
 *
 *  local    a call of at most a workgroup of tokens: one workgroup holds every
 *           token's claim in workgroup memory, and a token owns its slot
 *           unless a later token claims it too. One dispatch, no table.
 *
 * Slots outside the pool and negative slots are copied as they are, so the
 * scatter records and skips them as before. A copy's claim also reads its
 * source slots: a pair skipped there claims nothing, so the last pair that
 * is not skipped owns its destination (resolve then gives the skipped one -1).
 */
import { SLOT_OWNERS } from '../generated/params.js';
import type { SlotOwnersParams, SlotOwnersRanges } from '../generated/params.js';
import { ENTRY_BUILTINS, INDEX_RANGE_WGSL, indexReader, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { SlotOwnersPlan } from './plan.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

export function slotOwnersShader(plan: SlotOwnersPlan): KernelSource<SlotOwnersParams, SlotOwnersRanges> {
  const i64 = plan.slotType === 'i64';
  const skips = plan.skipType !== undefined;
  const bindings = SLOT_OWNERS.bindings({ table: plan.stage !== 'local', owned: plan.stage !== 'claim', skips });
  const writeOwned = i64 ? 'owned[2u * n] = owned_.x;\n  owned[2u * n + 1u] = owned_.y;' : 'owned[n] = owned_.x;';
  if (plan.stage === 'local') return kernelSource(SLOT_OWNERS, bindings, localStage(plan, bindings.wgsl, writeOwned));
  const mark = ownerMark(plan.rule);
  const body =
    plan.stage === 'claim'
      ? `if (inPool${skips ? ' && !indexIsNegative(skipAt(n))' : ''}) { atomicMax(&owners[slot.x], ${mark}); }`
      : `var owned_ = slot;
  if (inPool) {
    if (atomicLoad(&owners[slot.x]) == ${mark}) {
      atomicStore(&owners[slot.x], 0u);
    } else {
      owned_ = vec2<u32>(0xffffffffu, 0xffffffffu);
    }
  }
  ${writeOwned}`;
  const code = `${INDEX_RANGE_WGSL}
${SLOT_OWNERS.uniformsWgsl}
${bindings.wgsl}
${indexReader('slotAt', 'slots', plan.slotType)}
${skips ? indexReader('skipAt', 'skipIf', plan.skipType!) : ''}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let n = linearWorkgroup * ${plan.workgroupSize}u + lane;
  if (n >= params.tokens) { return; }
  let slot = slotAt(n);
  let inPool = !indexIsNegative(slot) && indexBelow(slot, params.slotBelow);
  ${body}
}
`;
  return kernelSource(SLOT_OWNERS, bindings, code);
}

/**
 * The local stage: token n's claim (its slot, where in the pool and its pair not skipped; else no slot) in
 * workgroup memory, then each token looks through the later tokens' claims for its own slot.
 */
function localStage(plan: SlotOwnersPlan, bindingsWgsl: string, writeOwned: string): string {
  const skips = plan.skipType !== undefined;
  // Rule 'last' (the contracts' only one): a later claim of the slot takes it.
  return `${INDEX_RANGE_WGSL}
${SLOT_OWNERS.uniformsWgsl}
${bindingsWgsl}
${indexReader('slotAt', 'slots', plan.slotType)}
${skips ? indexReader('skipAt', 'skipIf', plan.skipType!) : ''}

const NO_CLAIM = vec2<u32>(0xffffffffu, 0xffffffffu);
var<workgroup> claims: array<vec2<u32>, ${plan.workgroupSize}>;

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  let n = lane;
  var slot = NO_CLAIM;
  var inPool = false;
  var claimed = false;
  if (n < params.tokens) {
    slot = slotAt(n);
    inPool = !indexIsNegative(slot) && indexBelow(slot, params.slotBelow);
    claimed = inPool${skips ? ' && !indexIsNegative(skipAt(n))' : ''};
  }
  claims[n] = select(NO_CLAIM, slot, claimed);
  workgroupBarrier();
  if (n >= params.tokens) { return; }
  var owned_ = slot;
  if (inPool) {
    var taken = !claimed;
    for (var m = n + 1u; m < params.tokens && !taken; m++) { taken = all(claims[m] == slot); }
    if (taken) { owned_ = NO_CLAIM; }
  }
  ${writeOwned}
}
`;
}

/** What a token writes into the owner table so that atomicMax leaves the token the rule names; 0 is "no owner". */
function ownerMark(rule: SlotOwnersPlan['rule']): string {
  switch (rule) {
    case 'last':
      return 'n + 1u';
  }
}
