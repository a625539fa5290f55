/** A reference line of the usage chart: a share of the allotment and its count. */
export interface ShareLine {
  percent: 80 | 100;
  value: number;
}

export interface UsageScale {
  /** The y axis runs from 0 to this. */
  top: number;
  /** The y axis's ticks: 0 and round multiples up to `top`, at most six, whole numbers (evals are counted). */
  ticks: number[];
  /** The 80% and 100% lines the axis reaches. */
  shown: ShareLine[];
  /** The lines above the axis: the data is far below them. */
  above: ShareLine[];
}

/** A line is drawn when it is within this factor of the month's count: near enough to read the count beside it. */
const LINE_REACH = 1.5;
/** Room above the highest point or line, so neither touches the top. */
const HEADROOM = 1.1;
/** An empty month: a line on zero of a 0 to 5 axis. */
const EMPTY_TOP = 5;

/** Round tops close to one another, so the data keeps most of the axis. */
const ROUND_STEPS = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10];

/** The smallest round number (a ROUND_STEPS times a power of ten) at least `value` (> 0): ticks stay readable. */
export function niceCeiling(value: number): number {
  const power = 10 ** Math.floor(Math.log10(value));
  const step = ROUND_STEPS.find((factor) => factor * power >= value * (1 - 1e-12))!;
  return step * power;
}

function ticksUpTo(top: number): number[] {
  const step = Math.ceil(niceCeiling(top / 5));
  return Array.from({ length: Math.floor(top / step) + 1 }, (_, index) => index * step);
}

/**
 * The usage chart's y axis: scaled to the month's count, so a new organization's few evals rise across the chart
 * instead of lying on zero under an allotment thousands of times larger. The 80% and 100% lines extend the axis
 * when they are within LINE_REACH of the count (the month is heading there); further away they are only named.
 */
export function usageScale(count: number, limit: number | null): UsageScale {
  const lines: ShareLine[] =
    limit === null || limit <= 0
      ? []
      : [
          { percent: 80, value: limit * 0.8 },
          { percent: 100, value: limit },
        ];
  const reach = Math.max(count, 1) * LINE_REACH;
  const shown = lines.filter((line) => line.value <= reach);
  const above = lines.filter((line) => line.value > reach);
  const highest = Math.max(count, ...shown.map((line) => line.value));
  const top = highest > 0 ? niceCeiling(highest * HEADROOM) : EMPTY_TOP;
  return { top, ticks: ticksUpTo(top), shown, above };
}
