import fc from 'fast-check';
import type { ContractError } from '../src/index.js';
import { describe, expect, it } from 'vitest';
import { forEverySeed } from '../../../propertySeeds.js';
import { breaksValueRule, valueRuleError } from '../src/backend/index.js';
import type { DeviceCheck, OwnedTensor } from '../src/backend/index.js';
import { Call } from '../src/runtime/call.js';
import type { ValueRuleSpec } from '../src/runtime/call.js';

const positionRule: ValueRuleSpec = { min: 0, below: 'P', ceiling: { below: 2 ** 31, code: 'KV028' } };
const slotRule: ValueRuleSpec = { below: 'S', negativeSkips: true };

/** The host check's error for `values`, or undefined when every value passes. */
function hostError(rule: ValueRuleSpec, code: string, dims: Record<string, number>, values: readonly bigint[]): ContractError | undefined {
  const call = new Call('KvMaterializer.materialize', { owner: {}, label: 'test', hostValues: () => values }, { dims, dtypes: {} });
  try {
    call.values('positions', {} as OwnedTensor, rule, code);
    return undefined;
  } catch (e) {
    return e as ContractError;
  }
}

/** What a device reports: its rule (the call hands it over), the first token that breaks it, that token's value. */
function deviceError(rule: ValueRuleSpec, code: string, dims: Record<string, number>, values: readonly bigint[]): ContractError | undefined {
  const call = new Call('KvMaterializer.materialize', { owner: {}, label: 'test' }, { dims, dtypes: {} });
  call.values('positions', {} as OwnedTensor, rule, code);
  const check: DeviceCheck = call.deviceChecks[0]!;
  const first = values.findIndex((v) => breaksValueRule(check, v));
  return first < 0 ? undefined : valueRuleError(check, first, values[first]!, call.dims);
}

const described = (e: ContractError | undefined) => e && { code: e.code, message: e.message, details: e.details };

describe('value rules', () => {
  it('the device decoding and the host check give the same error (code, details, message) for any values', async () => {
    const value = fc.oneof(fc.bigInt({ min: -5n, max: 40n }), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.constantFrom(2n ** 31n - 1n, 2n ** 31n));
    await forEverySeed(100, (run) => fc.assert(
      fc.property(fc.array(value, { minLength: 1, maxLength: 12 }), fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined }), (values, P) => {
        const dims: Record<string, number> = P === undefined ? { T: values.length } : { T: values.length, P };
        expect(described(deviceError(positionRule, 'KV017', dims, values))).toEqual(described(hostError(positionRule, 'KV017', dims, values)));
        expect(described(deviceError(slotRule, 'KV038', { S: 9 }, values))).toEqual(described(hostError(slotRule, 'KV038', { S: 9 }, values)));
      }),
      run,
    ));
  });

  it('a ceiling caps the bound a kernel enforces and raises its own code; the dim keeps its code and message', () => {
    const call = new Call('KvMaterializer.materialize', { owner: {}, label: 'test' }, { dims: { P: 64 }, dtypes: {} });
    call.values('positions', {} as OwnedTensor, positionRule, 'KV017');
    call.values('positions', {} as OwnedTensor, { ...positionRule, below: 'Q' }, 'KV017');
    const [cache, base] = call.deviceChecks;
    expect([cache!.below, cache!.declaredBelow, base!.below, base!.declaredBelow]).toEqual([64, 64, 2 ** 31, undefined]);
    expect(valueRuleError(cache!, 2, 2n ** 40n, {}).code).toBe('KV017');
    const past = valueRuleError(base!, 2, 2n ** 40n, {});
    expect([past.code, past.details]).toEqual(['KV028', { arg: 'positions', index: 2, actual: 2n ** 40n, expected: 2 ** 31, dims: {} }]);
    const negative = valueRuleError(base!, 1, -3, {});
    expect([negative.code, negative.details.expected]).toEqual(['KV017', '∞']);
    expect([breaksValueRule(base!, 2 ** 31 - 1), breaksValueRule(base!, 2 ** 31), breaksValueRule(base!, -1)]).toEqual([false, true, true]);
  });

  it('negative slots skip, whatever their size', () => {
    const call = new Call('ropePoolFused', { owner: {}, label: 'test' }, { dims: { S: 4 }, dtypes: {} });
    call.values('slots', {} as OwnedTensor, slotRule, 'KV038');
    const slots = call.deviceChecks[0]!;
    expect([-(2n ** 62n), -1, 0, 3, 4].map((v) => breaksValueRule(slots, v))).toEqual([false, false, false, false, true]);
  });

  it('a float rule (eps): NaN, ±Inf and negatives break it, -0 and 0 do not; host and device report the same error', async () => {
    const epsRule: ValueRuleSpec = { min: 0, finite: true };
    const float = fc.oneof(fc.float({ noDefaultInfinity: false, noNaN: false }), fc.constantFrom(Number.NaN, -0, 0, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -1e-30, 1e-6));
    await forEverySeed(100, (run) => fc.assert(
      fc.property(fc.array(float, { minLength: 1, maxLength: 6 }), (values) => {
        const host = (() => {
          const call = new Call('fusedNormRopeStacked', { owner: {}, label: 'test', hostValues: () => values }, { dims: { L: values.length }, dtypes: {} });
          try {
            call.values('eps', {} as OwnedTensor, epsRule, 'KV019');
            return undefined;
          } catch (e) {
            return e as ContractError;
          }
        })();
        const call = new Call('fusedNormRopeStacked', { owner: {}, label: 'test' }, { dims: { L: values.length }, dtypes: {} });
        call.values('eps', {} as OwnedTensor, epsRule, 'KV019');
        const check = call.deviceChecks[0]!;
        const first = values.findIndex((v) => breaksValueRule(check, v));
        expect(first).toBe(values.findIndex((v) => !(Number.isFinite(v) && v >= 0)));
        const device = first < 0 ? undefined : valueRuleError(check, first, values[first]!, call.dims);
        expect(described(device)).toEqual(described(host));
      }),
      run,
    ));
    const call = new Call('fusedNormRopeStacked', { owner: {}, label: 'test' }, { dims: { L: 2 }, dtypes: {} });
    call.values('eps', {} as OwnedTensor, epsRule, 'KV019');
    const e = valueRuleError(call.deviceChecks[0]!, 1, Number.NaN, call.dims);
    expect([e.code, e.details.arg, e.details.index, e.details.expected]).toEqual(['KV019', 'eps', 1, 'finite and >= 0']);
    expect(e.message).toContain('eps[1] = NaN');
  });

  it('eps given as a number is the number rule (KV008), not a tensor rule', () => {
    const call = new Call('createKvMaterializer', { owner: {}, label: 'test' }, { dims: { L: 2 }, dtypes: {} });
    call.values('eps', 1e-6, { min: 0, finite: true }, 'KV019');
    expect(call.deviceChecks).toEqual([]);
  });
});
