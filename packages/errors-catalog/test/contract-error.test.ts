import * as contracts from '@kvkit/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { ContractError, explain, isContractError, setDocsBase } from '../src/index.js';

describe('ContractError', () => {
  afterEach(() => setDocsBase(undefined));

  it('renders the template, the bound dims and the command that prints this entry', () => {
    const e = new ContractError('KV014', 'fusedNormRopeStacked', { arg: 'kOut', actual: [4, 2, 2, 8], expected: '[L, T, H, D] = [2, 4, 2, 8]' }, { H: 2, D: 8, T: 4, L: 2 });
    expect(e.message).toBe(
      '[KV014] fusedNormRopeStacked: kOut has shape [4, 2, 2, 8]; expected [L, T, H, D] = [2, 4, 2, 8]. H=2 D=8 T=4 L=2. Run npx kvkit explain KV014',
    );
    expect(e.docsUrl).toBeUndefined();
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe('ContractError');
    expect(e.code).toBe('KV014');
    expect(e.op).toBe('fusedNormRopeStacked');
    expect(e.details).toEqual({ arg: 'kOut', actual: [4, 2, 2, 8], expected: '[L, T, H, D] = [2, 4, 2, 8]', dims: { H: 2, D: 8, T: 4, L: 2 } });
    expect(e.fixes).toEqual(explain('KV014')!.solutions);
    expect(isContractError(e)).toBe(true);
    expect(isContractError(new TypeError('x'))).toBe(false);
  });

  it('is the ContractError of @kvkit/contracts, so errors thrown by a backend are instances of it', () => {
    expect(ContractError).toBe(contracts.ContractError);
    expect(new contracts.ContractError('KV012', 'fusedNormRopeStacked')).toBeInstanceOf(ContractError);
    // One docs base for both: setting it here moves the links of errors made in contracts.
    setDocsBase('https://example.test/kvkit');
    expect(new contracts.ContractError('KV012', 'fusedNormRopeStacked').docsUrl).toBe('https://example.test/kvkit/errors/kv012/');
  });

  it('points at another docs base when asked', () => {
    setDocsBase('http://localhost:4321/');
    expect(new ContractError('KV003', 'read', { arg: 'tensor' }).docsUrl).toBe('http://localhost:4321/errors/kv003/');
  });

  it('explain accepts the code in any usual spelling and rejects unknown ones', () => {
    expect(explain('KV012')?.code).toBe('KV012');
    expect(explain('kv012')?.code).toBe('KV012');
    expect(explain('12')?.code).toBe('KV012');
    expect(explain('KV999')).toBeUndefined();
    expect(explain('hello')).toBeUndefined();
  });
});
