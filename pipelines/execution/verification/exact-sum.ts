// Exact summation: Python's math.fsum, the correctly rounded (round-half-even) sum of doubles.
//
// Two ways to the same bits. `partialsSum` is Shewchuk's algorithm, as CPython runs it: a list of
// non-overlapping partial sums that every value is added through, so its cost grows with the number
// of partials (a 65,536-pixel image's squared errors: about 1.5 ms). `fsum` first tries a fixed-point
// accumulator: every finite double is an integer M < 2^53 times 2^(b − 1074) for a bit position
// b ≥ 0, so a value is added exactly by splitting M · 2^(b mod 32) into three 32-bit limbs of one
// signed 2,176-bit number (limbs kept as doubles: exact until a limb reaches 2^53, so carries are
// propagated every 2^20 values). At the end the limbs, made non-negative, are exact doubles that do
// not overlap, and `partialsSum` of those few rounds them once: the same correctly rounded sum, for
// a fraction of the cost. Python's exceptions depend on the order of the values (an intermediate
// overflow), so any value that is not finite or not far below the overflow threshold sends the whole
// list to `partialsSum`, which reproduces them.

const LIMB_BITS = 32;
const LIMB = 2 ** LIMB_BITS;
const LIMBS = 68; // bit positions 0..2,175: values below 2^969, their carries, a sign limb
/** Values with |x| ≥ 2^969 go to partialsSum: below it, 2^50 of them cannot overflow a double. */
const FAST_LIMIT_BIASED_EXPONENT = 969 + 1023;
/** Carries are propagated before this many values have been added: each adds less than 2^32 to a limb. */
const VALUES_PER_CARRY = 2 ** 20;

/** 2^n for an integer n in [-1074, 1023], built by exact doublings and halvings. */
function powerOfTwo(n: number): number {
  let x = 1;
  for (let i = 0; i < Math.abs(n); i++) x = n > 0 ? x * 2 : x / 2;
  return x;
}

// Scaling a value of limb k by 2^(1074 − 32k) in two exact steps (the factor alone can overflow).
const SCALE_HIGH = new Float64Array(LIMBS);
const SCALE_LOW = new Float64Array(LIMBS);
/** 2^(32k − 1074): a limb's weight. */
const LIMB_WEIGHT = new Float64Array(LIMBS);
for (let k = 0; k < LIMBS; k++) {
  const shift = 1074 - LIMB_BITS * k;
  const half = Math.trunc(shift / 2);
  SCALE_HIGH[k] = powerOfTwo(half);
  SCALE_LOW[k] = powerOfTwo(shift - half);
  LIMB_WEIGHT[k] = LIMB_BITS * k - 1074 <= 1023 ? powerOfTwo(LIMB_BITS * k - 1074) : Infinity;
}

// The biased exponent of a double, read from its high 32-bit word.
const BITS = new Float64Array(1);
const WORDS = new Uint32Array(BITS.buffer);
const HIGH_WORD = new Uint8Array(new Float64Array([1]).buffer)[7] === 0x3f ? 1 : 0;

/** Carries every limb's excess into the next one: limbs 0..LIMBS−2 end in [0, 2^32), the last signed. */
function propagateCarries(limbs: Float64Array): void {
  for (let k = 0; k < LIMBS - 1; k++) {
    const carry = Math.floor(limbs[k]! / LIMB);
    if (carry !== 0) {
      limbs[k] = limbs[k]! - carry * LIMB;
      limbs[k + 1] = limbs[k + 1]! + carry;
    }
  }
}

/**
 * The exact sum of the values, correctly rounded; undefined when a value is not finite or
 * |value| ≥ 2^969 (partialsSum decides those).
 */
function fixedPointSum(list: ArrayLike<number>): number | undefined {
  const limbs = new Float64Array(LIMBS);
  let sinceCarry = 0; // values added since the last carries (zeros add nothing)
  for (let i = 0; i < list.length; i++) {
    const x = list[i]!;
    if (x === 0) continue;
    if (++sinceCarry === VALUES_PER_CARRY) {
      propagateCarries(limbs);
      sinceCarry = 1;
    }
    BITS[0] = x;
    const biased = (WORDS[HIGH_WORD]! >>> 20) & 0x7ff;
    if (biased >= FAST_LIMIT_BIASED_EXPONENT) return undefined; // also NaN and ±Infinity (2047)
    const position = biased === 0 ? 0 : biased - 1; // of the lowest bit of the 53-bit integer M
    const k = position >>> 5;
    // |x| · 2^(1074 − 32k) = M · 2^(position mod 32) < 2^84, an exact integer; split in three limbs
    const y = Math.abs(x) * SCALE_HIGH[k]! * SCALE_LOW[k]!;
    const top = Math.floor(y / 2 ** 64);
    const rest = y - top * 2 ** 64;
    const middle = Math.floor(rest / LIMB);
    const bottom = rest - middle * LIMB;
    if (x > 0) {
      limbs[k] = limbs[k]! + bottom;
      limbs[k + 1] = limbs[k + 1]! + middle;
      limbs[k + 2] = limbs[k + 2]! + top;
    } else {
      limbs[k] = limbs[k]! - bottom;
      limbs[k + 1] = limbs[k + 1]! - middle;
      limbs[k + 2] = limbs[k + 2]! - top;
    }
  }
  propagateCarries(limbs);
  const negative = limbs[LIMBS - 1]! < 0;
  if (negative) {
    for (let k = 0; k < LIMBS; k++) limbs[k] = -limbs[k]!;
    propagateCarries(limbs);
  }
  // every limb in [0, 2^32) now, its weighted value an exact double
  const terms: number[] = [];
  for (let k = 0; k < LIMBS; k++) if (limbs[k] !== 0) terms.push(limbs[k]! * LIMB_WEIGHT[k]!);
  const sum = partialsSum(terms);
  return negative ? -sum : sum;
}

/**
 * Exactly Python's math.fsum: the correctly rounded (round-half-even) sum of the values. Like Python:
 * an infinite or NaN summand makes the result that special value (inf + -inf throws), a finite
 * overflow of the partials throws, and the sum of no values (or of zeros only) is +0.0.
 */
export function fsum(values: Iterable<number> | ArrayLike<number>): number {
  const list: ArrayLike<number> =
    typeof (values as ArrayLike<number>).length === 'number' ? (values as ArrayLike<number>) : Array.from(values as Iterable<number>);
  return fixedPointSum(list) ?? partialsSum(list);
}

/** Shewchuk's non-overlapping partials, in CPython's order and with its exceptions (see fsum). */
export function partialsSum(list: ArrayLike<number>): number {
  // Shewchuk's partials never exceed ~40 for doubles (2098 exponent values / 53 bits); the typed
  // buffer grows anyway if an input proves otherwise.
  let partials = new Float64Array(64);
  let count = 0;
  let specialSum = 0;
  let infSum = 0;
  for (let k = 0; k < list.length; k++) {
    const value = list[k]!;
    let x = value;
    let i = 0;
    for (let j = 0; j < count; j++) {
      let y = partials[j]!;
      if (Math.abs(x) < Math.abs(y)) {
        const t = x;
        x = y;
        y = t;
      }
      const hi = x + y;
      const lo = y - (hi - x);
      if (lo !== 0) partials[i++] = lo;
      x = hi;
    }
    count = i;
    if (x !== 0) {
      if (!Number.isFinite(x)) {
        // Either a special summand or an intermediate overflow of finite summands.
        if (Number.isFinite(value)) throw new RangeError('intermediate overflow in fsum');
        if (value === Infinity || value === -Infinity) infSum += value;
        specialSum += value;
        count = 0;
      } else {
        if (count === partials.length) {
          const grown = new Float64Array(count * 2);
          grown.set(partials);
          partials = grown;
        }
        partials[count++] = x;
      }
    }
  }
  if (specialSum !== 0) {
    if (Number.isNaN(infSum)) throw new RangeError('-inf + inf in fsum');
    return specialSum;
  }
  return roundPartials(partials, count);
}

/** The partials' sum rounded once: from the top down, until the running sum becomes inexact. */
function roundPartials(partials: Float64Array, count: number): number {
  let n = count;
  let hi = 0;
  if (n > 0) {
    hi = partials[--n]!;
    let lo = 0;
    while (n > 0) {
      const x = hi;
      const y = partials[--n]!;
      hi = x + y;
      const yr = hi - x;
      lo = y - yr;
      if (lo !== 0) break;
    }
    // Round half-even across partials: if the rounding error lo is exactly half an ulp and the
    // next partial pushes it the same way, the true sum lies beyond the halfway point.
    if (n > 0) {
      const next = partials[n - 1]!;
      if ((lo < 0 && next < 0) || (lo > 0 && next > 0)) {
        const y = lo * 2;
        const x = hi + y;
        const yr = x - hi;
        if (y === yr) hi = x;
      }
    }
  }
  return hi;
}
