import { createHash, randomInt, timingSafeEqual } from 'node:crypto';

/**
 * The one-time code of the development sign-in (DEVELOPMENT_SIGN_IN=code,
 * docs/operators/identity-provider.md "Where the development sign-in is allowed"), as Jupyter
 * guards its server with a token in its log: whoever can read the log can sign in, whoever can
 * only reach the port cannot. 20 characters of a 32-letter alphabet are 100 random bits, so
 * guessing is hopeless within the failed-attempt budget of an address; the code is used up by
 * the sign-in it lets through and the next one is printed then.
 */

/** Crockford's base32 without the letters read as digits (i, l, o, u): what a person copies from a log survives. */
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const GROUPS = 4;
const GROUP_LENGTH = 5;

export interface SignInCode {
  /** Whether `candidate` is the current code. A match uses it up, and a new code is printed. */
  redeem(candidate: string): boolean;
}

function newCode(): string {
  const groups = Array.from({ length: GROUPS }, () => Array.from({ length: GROUP_LENGTH }, () => ALPHABET[randomInt(ALPHABET.length)]).join(''));
  return groups.join('-');
}

/** What is compared: case, the dashes and spaces a person may type or leave out do not count. */
const digest = (code: string) => createHash('sha256').update(code.toLowerCase().replace(/[\s-]/g, '')).digest();

/** A code, printed with `print` now and again each time one is used. */
export function createSignInCode(print: (code: string, reason: 'start' | 'used') => void): SignInCode {
  let current = newCode();
  print(current, 'start');
  return {
    redeem(candidate) {
      // Digests of equal length, compared in constant time: the answer's timing says nothing of the code.
      if (candidate.length > 100 || !timingSafeEqual(digest(candidate), digest(current))) return false;
      current = newCode();
      print(current, 'used');
      return true;
    },
  };
}
