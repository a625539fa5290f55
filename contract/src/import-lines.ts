import { Type, type Static, type TObject, type TProperties } from '@sinclair/typebox';
import { CreateFeatureBody } from './features.ts';
import { CreatePlanBody } from './plans.ts';
import { CreateSubscriberBody } from './subscribers.ts';
import { CreateSubscriptionBody, SubscriptionParams } from './subscriptions.ts';
import { OverrideParams, PutOverrideBody } from './overrides.ts';

/**
 * One import line per record type: `type` and exactly the fields of the record's single-write route, its path
 * parameters included (DESIGN.md §5), so what `GET /org/export` writes is what these accept.
 */
const line = <K extends string, T extends TProperties>(type: K, properties: T) =>
  Type.Object({ type: Type.Literal(type), ...properties }, { additionalProperties: false });

const bodyOf = <T extends TProperties>(schema: TObject<T>): T => schema.properties;

export const FeatureLineSchema = line('feature', bodyOf(CreateFeatureBody));
export type FeatureLine = Static<typeof FeatureLineSchema>;

export const PlanLineSchema = line('plan', bodyOf(CreatePlanBody));
export type PlanLine = Static<typeof PlanLineSchema>;

export const SubscriberLineSchema = line('subscriber', bodyOf(CreateSubscriberBody));
export type SubscriberLine = Static<typeof SubscriberLineSchema>;

export const SubscriptionLineSchema = line('subscription', {
  subscriber_id: SubscriptionParams.properties.subscriber_id,
  ...bodyOf(CreateSubscriptionBody),
});
export type SubscriptionLine = Static<typeof SubscriptionLineSchema>;

/** `feature_key` as the PUT's path names it. */
export const OverrideLineSchema = line('override', {
  subscriber_id: OverrideParams.properties.subscriber_id,
  feature_key: OverrideParams.properties.feature_key,
  ...bodyOf(PutOverrideBody),
});
export type OverrideLine = Static<typeof OverrideLineSchema>;

export type ImportRecordLine = FeatureLine | PlanLine | SubscriberLine | SubscriptionLine | OverrideLine;
