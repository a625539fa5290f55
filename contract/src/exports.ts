import { Type, type Static } from '@sinclair/typebox';
import { CreateFeatureBody } from './features.ts';
import { CreatePlanBody } from './plans.ts';
import { CreateSubscriberBody } from './subscribers.ts';
import { CreateSubscriptionBody } from './subscriptions.ts';
import { PutOverrideBody } from './overrides.ts';
import { CreditLineSchema } from './import-lines.ts';

/**
 * DESIGN.md §5, "Import and export": `GET /org/export` answers NDJSON, one record a line, in dependency order
 * (features, plans, subscribers, subscriptions, overrides, credits). Each line is the body of the record's single-write
 * route with its `type`, and the path's natural keys where the route takes them from the path: what
 * `POST /org/imports` takes back.
 */
export const EXPORT_CONTENT_TYPE = 'application/x-ndjson';

const FeatureExportLine = Type.Object({
  type: Type.Literal('feature'),
  ...CreateFeatureBody.properties,
});

const PlanExportLine = Type.Object({
  type: Type.Literal('plan'),
  ...CreatePlanBody.properties,
  archived: Type.Optional(
    Type.Literal(true, { description: 'present only on an archived plan (`POST /org/plans/{key}/archive`)' }),
  ),
});

const SubscriberExportLine = Type.Object({
  type: Type.Literal('subscriber'),
  ...CreateSubscriberBody.properties,
});

const SubscriptionExportLine = Type.Object(
  {
    type: Type.Literal('subscription'),
    subscriber_id: Type.String(),
    ...CreateSubscriptionBody.properties,
  },
  { description: 'an active subscription; canceled ones are history, not state, and are not exported' },
);

const OverrideExportLine = Type.Object({
  type: Type.Literal('override'),
  subscriber_id: Type.String(),
  feature_key: Type.String({ description: 'the path parameter of PUT .../overrides/{feature_key}' }),
  ...PutOverrideBody.properties,
});

const credit = CreditLineSchema.properties;
const CreditExportLine = Type.Object(
  {
    ...credit,
    spent: Type.Integer({ minimum: 0, description: 'what it has given so far' }),
    priority: Type.Integer({ minimum: 1, maximum: 100 }),
    effective_at: Type.String({ format: 'date-time' }),
    expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    source: Type.Union([Type.Literal('manual'), Type.Literal('rollover')]),
  },
  {
    description:
      'a credit neither voided nor expired (those are history, not state); `name` only when it has one, ' +
      '`source_period_start` only on a rollover',
  },
);

export const ExportLineSchema = Type.Union(
  [
    FeatureExportLine,
    PlanExportLine,
    SubscriberExportLine,
    SubscriptionExportLine,
    OverrideExportLine,
    CreditExportLine,
  ],
  { $id: 'ExportLine' },
);
export type ExportLine = Static<typeof ExportLineSchema>;
