import { Type, type Static, type TObject, type TProperties } from '@sinclair/typebox';
import { CreateFeatureBody } from './features.ts';
import { CreatePlanBody } from './plans.ts';
import { CreateSubscriberBody } from './subscribers.ts';
import { CreateSubscriptionBody, SubscriptionParams } from './subscriptions.ts';
import { OverrideParams, PutOverrideBody } from './overrides.ts';
import { CreateCreditBody, CreditsParams, MAX_CREDIT_AMOUNT } from './credits.ts';

/**
 * One import line per record type: `type` and exactly the fields of the record's single-write route, its path
 * parameters included (DESIGN.md §5), so what `GET /org/export` writes is what these accept.
 */
const line = <K extends string, T extends TProperties>(type: K, properties: T) =>
  Type.Object({ type: Type.Literal(type), ...properties }, { additionalProperties: false });

const bodyOf = <T extends TProperties>(schema: TObject<T>): T => schema.properties;

export const FeatureLineSchema = line('feature', bodyOf(CreateFeatureBody));
export type FeatureLine = Static<typeof FeatureLineSchema>;

/**
 * `archived` as `POST /org/plans/{key}/archive` and `/unarchive` set it: false unarchives at once; true archives the
 * plan once the import's last line is applied, so the import's subscriptions to it are made first, as they were made
 * before it was archived (docs/decisions.md, "Credits and archived plans in import and export"). Absent: left as it is.
 */
export const PlanLineSchema = line('plan', {
  ...bodyOf(CreatePlanBody),
  archived: Type.Optional(Type.Boolean()),
});
export type PlanLine = Static<typeof PlanLineSchema>;

export const SubscriberLineSchema = line('subscriber', bodyOf(CreateSubscriberBody));
export type SubscriberLine = Static<typeof SubscriberLineSchema>;

/**
 * `anchored_at`, what only an import sets: where the subscription's subscription-anchored metered periods start (its
 * creation, or the anchor of the subscription it replaced). The export writes it, so a re-imported organization's
 * periods reset when the original's do; absent: the subscription's creation, as the route makes it.
 */
export const SubscriptionLineSchema = line('subscription', {
  subscriber_id: SubscriptionParams.properties.subscriber_id,
  ...bodyOf(CreateSubscriptionBody),
  anchored_at: Type.Optional(
    Type.String({
      format: 'date-time',
      description: 'where its subscription-anchored periods start (import and export only); absent: now',
    }),
  ),
});
export type SubscriptionLine = Static<typeof SubscriptionLineSchema>;

/** `feature_key` as the PUT's path names it. */
export const OverrideLineSchema = line('override', {
  subscriber_id: OverrideParams.properties.subscriber_id,
  feature_key: OverrideParams.properties.feature_key,
  ...bodyOf(PutOverrideBody),
});
export type OverrideLine = Static<typeof OverrideLineSchema>;

/** A credit's natural key: `cr_`, then letters, digits, `_` and `-` (the service's ids and a rollover's fit it). */
export const CREDIT_ID_PATTERN = '^cr_[A-Za-z0-9_-]{1,252}$';

/**
 * The body of `POST /org/subscribers/{id}/credits` and what only an import sets: the credit's id (its natural key),
 * what it has spent, when it was made (it ranks credits of equal priority and expiry) and, for a rollover, the
 * period whose allowance it is.
 */
export const CreditLineSchema = line('credit', {
  credit_id: Type.String({
    pattern: CREDIT_ID_PATTERN,
    description: 'natural key: the credit is upserted by it',
  }),
  subscriber_id: CreditsParams.properties.subscriber_id,
  ...bodyOf(CreateCreditBody),
  spent: Type.Optional(
    Type.Integer({ minimum: 0, maximum: MAX_CREDIT_AMOUNT, description: 'at most amount; default 0' }),
  ),
  created_at: Type.Optional(Type.String({ format: 'date-time', description: 'default: now' })),
  source: Type.Optional(
    Type.Union([Type.Literal('manual'), Type.Literal('rollover')], { description: 'default manual' }),
  ),
  source_period_start: Type.Optional(
    Type.String({
      format: 'date-time',
      description: "a rollover's: the period whose unused allowance it is",
    }),
  ),
});
export type CreditLine = Static<typeof CreditLineSchema>;

export type ImportRecordLine =
  FeatureLine | PlanLine | SubscriberLine | SubscriptionLine | OverrideLine | CreditLine;
