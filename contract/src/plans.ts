import { Type, type Static } from '@sinclair/typebox';
import { PLAN_KEY_PATTERN, PaginationQuery, Timestamp, listOf } from './common.ts';
import { RolloverSchema } from './credits.ts';

export const PlanKindSchema = Type.Union([Type.Literal('catalog'), Type.Literal('custom')]);

/** Most grants one plan may carry; a catalog is a few hundred features at most. */
export const MAX_GRANTS_PER_PLAN = 1000;

const GrantLimit = Type.Union([Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), Type.Null()], {
  description: 'integer >= 0; null = unlimited',
});

export const FlagGrantSchema = Type.Object({ feature: Type.String(), kind: Type.Literal('flag') });
export const LimitGrantSchema = Type.Object({
  feature: Type.String(),
  kind: Type.Literal('limit'),
  limit: GrantLimit,
});
export const MeteredResetSchema = Type.Union(
  [
    Type.Literal('day'),
    Type.Literal('week'),
    Type.Literal('month'),
    Type.Literal('year'),
    Type.Literal('never'),
  ],
  { description: 'when used starts again at 0; periods are UTC, weeks start on Monday' },
);
export type MeteredReset = Static<typeof MeteredResetSchema>;
export const MeteredResetAnchorSchema = Type.Union([Type.Literal('calendar'), Type.Literal('subscription')], {
  description:
    "calendar: periods start on the UTC calendar; subscription: at the granting subscription's start",
});
export type MeteredResetAnchor = Static<typeof MeteredResetAnchorSchema>;

export const MeteredGrantSchema = Type.Object({
  feature: Type.String(),
  kind: Type.Literal('metered'),
  limit: GrantLimit,
  reset: MeteredResetSchema,
  reset_anchor: MeteredResetAnchorSchema,
  soft: Type.Boolean({ description: 'true: use beyond the limit is allowed and reported as overage' }),
  rollover: Type.Union([RolloverSchema, Type.Null()], {
    description: "null: a period's unused allowance is not carried over",
  }),
});
export const GrantSchema = Type.Union([FlagGrantSchema, LimitGrantSchema, MeteredGrantSchema]);
export type GrantBody = Static<typeof GrantSchema>;

export const PlanSchema = Type.Object(
  {
    key: Type.String(),
    name: Type.String(),
    kind: PlanKindSchema,
    archived: Type.Boolean(),
    grants: Type.Array(GrantSchema, { description: 'ordered by feature key' }),
    created_at: Timestamp,
    updated_at: Timestamp,
    subscriber_count: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: 'active subscriptions of the plan; only with `include=subscriber_count`',
      }),
    ),
  },
  { $id: 'Plan' },
);
export type PlanBody = Static<typeof PlanSchema>;

export const PlanKeyParams = Type.Object({ key: Type.String({ minLength: 1, maxLength: 255 }) });

/**
 * A grant as a request sends it. The shape rules that depend on `kind` (a flag carries no `limit`, a limit
 * must carry one) and on the catalog (the feature exists and has that kind) are checked by the service, so
 * the error names the grant that broke them.
 */
export const GrantInput = Type.Object(
  {
    feature: Type.String({ minLength: 1, maxLength: 255 }),
    kind: Type.Union([Type.Literal('flag'), Type.Literal('limit'), Type.Literal('metered')]),
    limit: Type.Optional(GrantLimit),
    reset: Type.Optional(MeteredResetSchema),
    reset_anchor: Type.Optional(MeteredResetAnchorSchema),
    soft: Type.Optional(Type.Boolean()),
    rollover: Type.Optional(Type.Union([RolloverSchema, Type.Null()])),
  },
  { additionalProperties: false },
);
export type GrantInput = Static<typeof GrantInput>;

const GrantsInput = Type.Array(GrantInput, {
  maxItems: MAX_GRANTS_PER_PLAN,
  description:
    'each feature at most once; a flag grant has no `limit`, a limit or metered grant must have one; `reset` ' +
    '(default month), `reset_anchor` (default calendar), `soft` (default false) and `rollover` (default null) ' +
    'are for metered grants only',
});

export const CreatePlanBody = Type.Object(
  {
    key: Type.String({
      pattern: PLAN_KEY_PATTERN,
      description: 'lowercase letters, digits, _ and -; at most 64',
    }),
    name: Type.String({ minLength: 1, maxLength: 255 }),
    kind: PlanKindSchema,
    grants: Type.Optional(GrantsInput),
  },
  { additionalProperties: false },
);
export type CreatePlanBody = Static<typeof CreatePlanBody>;

/** `key` and `kind` are immutable: sending them is a 422 like any unknown field. */
export const UpdatePlanBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    grants: Type.Optional(GrantsInput),
  },
  { additionalProperties: false },
);
export type UpdatePlanBody = Static<typeof UpdatePlanBody>;

/**
 * Opt-in additions to a plan read (Stripe's `expand` pattern): without it the plan object is exactly SPEC.md's.
 * `subscriber_count` costs one grouped count per request (per page on the list).
 */
const PlanInclude = Type.Optional(
  Type.Literal('subscriber_count', { description: 'add `subscriber_count` to each plan' }),
);

export const PlanReadQuery = Type.Object({ include: PlanInclude }, { additionalProperties: false });
export type PlanReadQuery = Static<typeof PlanReadQuery>;

export const ListPlansQuery = Type.Object(
  { ...PaginationQuery, kind: Type.Optional(PlanKindSchema), include: PlanInclude },
  { additionalProperties: false },
);
export type ListPlansQuery = Static<typeof ListPlansQuery>;

export const PlanListSchema = listOf('plans', PlanSchema);
