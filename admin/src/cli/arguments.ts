import { InvalidArgumentError } from 'commander';

/** An integer from min to max, refused here rather than by a database constraint the operator never sees. */
export const wholeNumber = (min: number, max: number) => (raw: string) => {
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(`must be a whole number from ${min} to ${max}`);
  }
  return value;
};
