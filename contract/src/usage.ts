import { Type, type Static } from '@sinclair/typebox';
import { NullableTimestamp } from './common.ts';

/** SPEC.md part 2, "Usage record (current month)". */
export const UsageRecordSchema = Type.Object(
  {
    gated: Type.Boolean({ description: 'false = no monthly cap applies to the organization now' }),
    reason: Type.Union([Type.Literal('unlimited'), Type.Null()], {
      description: 'why not gated; null when gated',
    }),
    period: Type.String({ pattern: '^[0-9]{4}-[0-9]{2}$', description: 'UTC month, YYYY-MM' }),
    count: Type.Integer({ minimum: 0, description: 'evals counted this month' }),
    limit: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: 'evals included; null = unlimited',
    }),
    plan: Type.Union([Type.String(), Type.Null()], { description: 'key of the allotment that applies' }),
    blocking: Type.Boolean({ description: 'true = evals stop 7 days after first reaching 100%' }),
    warn: Type.Union([Type.Literal('80'), Type.Literal('100'), Type.Literal('grace'), Type.Null()]),
    allowed: Type.Boolean({ description: 'false once evals are stopped' }),
    first_over_at: NullableTimestamp,
    blocked_at: NullableTimestamp,
  },
  { $id: 'UsageRecord' },
);
export type UsageRecordBody = Static<typeof UsageRecordSchema>;

/** Most months one history request may ask for: two years. */
export const MAX_HISTORY_MONTHS = 24;
export const DEFAULT_HISTORY_MONTHS = 6;

export const UsageHistoryQuery = Type.Object(
  {
    months: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_HISTORY_MONTHS,
        default: DEFAULT_HISTORY_MONTHS,
        description: 'how many UTC months, ending with the current one',
      }),
    ),
  },
  { additionalProperties: false },
);
export type UsageHistoryQuery = Static<typeof UsageHistoryQuery>;

const UsageDaySchema = Type.Object({
  date: Type.String({ pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$', description: 'UTC day, YYYY-MM-DD' }),
  count: Type.Integer({ minimum: 0, description: "the month's cumulative count as last seen that day" }),
});

export const UsageMonthSchema = Type.Object(
  {
    period: Type.String({ pattern: '^[0-9]{4}-[0-9]{2}$', description: 'UTC month, YYYY-MM' }),
    count: Type.Integer({
      minimum: 0,
      description: "evals counted in the month (the current month's is the live count)",
    }),
    limit: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description:
        "evals included: the month's last recorded allotment (the current one for this month); null = unlimited",
    }),
    days: Type.Array(UsageDaySchema, { description: 'sampled days, oldest first' }),
  },
  { $id: 'UsageMonth' },
);
export type UsageMonthBody = Static<typeof UsageMonthSchema>;

export const UsageHistorySchema = Type.Object(
  {
    months: Type.Array(UsageMonthSchema, {
      description: 'newest first: the current month, then each earlier month with recorded usage',
    }),
  },
  { $id: 'UsageHistory' },
);
export type UsageHistoryBody = Static<typeof UsageHistorySchema>;
