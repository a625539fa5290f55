import { Type, type Static } from '@sinclair/typebox';

export const EvalParams = Type.Object({ subscriber_id: Type.String({ minLength: 1, maxLength: 255 }) });
export type EvalParams = Static<typeof EvalParams>;

export const CheckBody = Type.Object(
  { feature: Type.String({ minLength: 1, maxLength: 255, description: 'catalog feature key' }) },
  { additionalProperties: false },
);
export type CheckBody = Static<typeof CheckBody>;

export const EntitlementsQuery = Type.Object(
  {
    all: Type.Optional(
      Type.Boolean({ description: 'every catalog feature, not only granted or overridden ones' }),
    ),
  },
  { additionalProperties: false },
);
export type EntitlementsQuery = Static<typeof EntitlementsQuery>;

/**
 * SPEC.md part 2 "Entitlement check result", fields in this order: the one schema of the answer, used by the
 * gateway's route (response schema), the resolver's types (`CheckResult`) and the OpenAPI document.
 */
export const CheckResultSchema = Type.Union(
  [
    Type.Object({
      feature: Type.String(),
      kind: Type.Literal('flag'),
      allowed: Type.Boolean(),
      source: Type.Union([Type.Literal('override'), Type.Literal('plan'), Type.Literal('none')]),
    }),
    Type.Object({
      feature: Type.String(),
      kind: Type.Literal('limit'),
      limit: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
      source: Type.Union([Type.Literal('override'), Type.Literal('plan'), Type.Literal('none')]),
    }),
  ],
  { $id: 'CheckResult' },
);

export type CheckResult = Static<typeof CheckResultSchema>;

export const EntitlementListSchema = Type.Object({
  subscriber_id: Type.String(),
  entitlements: Type.Array(CheckResultSchema),
});
export type EntitlementList = Static<typeof EntitlementListSchema>;
