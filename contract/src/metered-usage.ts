import { Type, type Static } from '@sinclair/typebox';
import { ErrorBodySchema, PaginationQuery, listOf } from './common.ts';
import { MeteredCheckResultSchema } from './evals.ts';

/**
 * DESIGN.md §5, "Report", "Reads and corrections": usage of metered features that already happened, reported to
 * the gateway, and what it reads back. A consume is the check route with `consume` (evals.ts).
 */

/** Most events one batch may carry. */
export const MAX_USAGE_EVENTS = 1000;
/** Largest amount one report may add, take away or set: Lua numbers are exact integers up to 2^53. */
export const MAX_USAGE_AMOUNT = 1_000_000_000_000;

const FeatureKey = Type.String({ minLength: 1, maxLength: 255, description: 'a metered feature key' });
const Delta = Type.Integer({
  minimum: -MAX_USAGE_AMOUNT,
  maximum: MAX_USAGE_AMOUNT,
  description: 'added to used (negative: taken away; used never goes below 0); not 0',
});
const SetTo = Type.Integer({ minimum: 0, maximum: MAX_USAGE_AMOUNT, description: 'used becomes this' });
export const IdempotencyKey = Type.String({
  minLength: 1,
  maxLength: 255,
  description: 'applied once per organization within 24 h; a repeat answers the first result again',
});

/** Exactly one of `delta` and `set`: the service says which rule broke, so the error names the field. */
export const ReportUsageBody = Type.Object(
  { feature: FeatureKey, delta: Type.Optional(Delta), set: Type.Optional(SetTo) },
  { additionalProperties: false },
);
export type ReportUsageBody = Static<typeof ReportUsageBody>;

export const UsageEvent = Type.Object(
  {
    subscriber_id: Type.String({ minLength: 1, maxLength: 255 }),
    feature: FeatureKey,
    delta: Type.Optional(Delta),
    set: Type.Optional(SetTo),
    idempotency_key: Type.Optional(IdempotencyKey),
  },
  { additionalProperties: false },
);
export type UsageEvent = Static<typeof UsageEvent>;

export const UsageEventsBody = Type.Object(
  { events: Type.Array(UsageEvent, { minItems: 1, maxItems: MAX_USAGE_EVENTS }) },
  { additionalProperties: false },
);
export type UsageEventsBody = Static<typeof UsageEventsBody>;

export const UsageEventsResultSchema = Type.Object({
  results: Type.Array(Type.Union([MeteredCheckResultSchema, ErrorBodySchema]), {
    description:
      "in the events' order: each a check result, or the error body of an event that was not applied",
  }),
});
export type UsageEventsResult = Static<typeof UsageEventsResultSchema>;

export const SubscriberUsageParams = Type.Object({
  subscriber_id: Type.String({ minLength: 1, maxLength: 255 }),
});
export type SubscriberUsageParams = Static<typeof SubscriberUsageParams>;

export const SubscriberFeatureUsageParams = Type.Object({
  subscriber_id: Type.String({ minLength: 1, maxLength: 255 }),
  feature: FeatureKey,
});
export type SubscriberFeatureUsageParams = Static<typeof SubscriberFeatureUsageParams>;

/** `GET /org/subscribers/{id}/usage`: every metered feature's current period. */
export const SubscriberUsageSchema = Type.Object({
  subscriber_id: Type.String(),
  usage: Type.Array(MeteredCheckResultSchema, { description: 'every metered catalog feature, by key' }),
});
export type SubscriberUsage = Static<typeof SubscriberUsageSchema>;

/** A period that has ended, with its final figure. */
export const UsagePeriodSchema = Type.Object(
  {
    feature: Type.String(),
    period_start: Type.String({ format: 'date-time' }),
    period_end: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'null for reset "never"',
    }),
    used: Type.Integer({ minimum: 0 }),
  },
  { $id: 'UsagePeriod' },
);
export type UsagePeriodBody = Static<typeof UsagePeriodSchema>;

export const ListUsagePeriodsQuery = Type.Object(
  { ...PaginationQuery },
  { additionalProperties: false, description: 'newest first; `starting_after` is a period_start' },
);
export type ListUsagePeriodsQuery = Static<typeof ListUsagePeriodsQuery>;

export const UsagePeriodListSchema = listOf('periods', UsagePeriodSchema);

/** `PUT /org/subscribers/{id}/usage/{feature}`: a correction of the current period, audited from -> to. */
export const CorrectUsageBody = Type.Object(
  { used: Type.Integer({ minimum: 0, maximum: MAX_USAGE_AMOUNT }) },
  { additionalProperties: false },
);
export type CorrectUsageBody = Static<typeof CorrectUsageBody>;
