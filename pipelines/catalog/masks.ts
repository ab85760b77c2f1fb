// Masks: a configuration of a condition as a string of 0/1 characters, the first for option A.
// Ascending binary order is the order of every table; mask k is k written in binary.
// What each option does is in docs/families.md.
import { OPTION_LETTERS, type OptionLetter } from './families.ts';

/** Every mask of a width in ascending binary order ("0000", "0001", …). */
export function allMasks(dimensions: number): string[] {
  return Array.from({ length: 2 ** dimensions }, (_, i) => maskString(i, dimensions));
}

export function maskString(index: number, dimensions: number): string {
  return index.toString(2).padStart(dimensions, '0');
}

/** The mask's position in ascending order, or -1 when it is not a mask of that width. */
export function maskIndex(mask: string, dimensions: number): number {
  return mask.length === dimensions && /^[01]+$/.test(mask) ? parseInt(mask, 2) : -1;
}

/** The bit of option i (0 = A) in a mask integer of the given width. */
export function optionBit(option: number, dimensions: number): number {
  return 1 << (dimensions - 1 - option);
}

export function optionLetter(option: number): string {
  return OPTION_LETTERS[option] ?? `#${option}`;
}

/** How many options a mask integer turns on. */
export function enabledCount(index: number): number {
  let n = 0;
  for (let v = index; v; v &= v - 1) n++;
  return n;
}

/** The mask with option `letter` set to `value`. */
export function withOption(mask: string, letter: OptionLetter, value: 0 | 1): string {
  const i = OPTION_LETTERS.indexOf(letter);
  return `${mask.slice(0, i)}${value}${mask.slice(i + 1)}`;
}

/** Whether every option of `settings` has the given value in `mask`. */
export function matches(mask: string, settings: Partial<Record<OptionLetter, 0 | 1>>): boolean {
  return Object.entries(settings).every(([letter, value]) => mask[OPTION_LETTERS.indexOf(letter as OptionLetter)] === String(value));
}

/** The six-option mask of a four-option mask in the E=F=0 subcube of its paired condition. */
export function pairedSubcubeMask(fourOptionMask: string): string {
  return `${fourOptionMask}00`;
}

/** An inactive-option declaration: `option` has no effect where every `inactive_when` setting holds. */
export interface InactiveOption {
  option: OptionLetter;
  inactive_when: Partial<Record<OptionLetter, 0 | 1>>;
}

/** The mask pairs a declaration ties together: the option off where the declaration applies, and on. */
export function inactivePairs(declaration: InactiveOption, dimensions: number): [string, string][] {
  return allMasks(dimensions)
    .filter((mask) => mask[OPTION_LETTERS.indexOf(declaration.option)] === '0' && matches(mask, declaration.inactive_when))
    .map((mask) => [mask, withOption(mask, declaration.option, 1)]);
}
