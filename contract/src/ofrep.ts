import { Type, type Static } from '@sinclair/typebox';

/**
 * OpenFeature Remote Evaluation Protocol (open-feature/protocol `service/openapi.yaml`), as the gateway answers
 * it. Request bodies accept any further properties: the protocol lets providers send more than it defines.
 */
export const OfrepParams = Type.Object({
  key: Type.String({ minLength: 1, maxLength: 255, description: 'catalog feature key' }),
});
export type OfrepParams = Static<typeof OfrepParams>;

export const OfrepRequest = Type.Object({
  context: Type.Optional(
    Type.Object(
      { targetingKey: Type.Optional(Type.String({ description: 'the subscriber id' })) },
      { additionalProperties: true, description: 'evaluation context; only targetingKey is used' },
    ),
  ),
});
export type OfrepRequest = Static<typeof OfrepRequest>;

export const OfrepSource = Type.Union([Type.Literal('override'), Type.Literal('plan'), Type.Literal('none')]);

export const OfrepSuccess = Type.Object({
  key: Type.String(),
  value: Type.Union([Type.Boolean(), Type.Integer({ minimum: 0 })], {
    description:
      'a flag: allowed; a limit: the limit; a metered feature: what remains of its limit this period; ' +
      'Number.MAX_SAFE_INTEGER when unlimited',
  }),
  reason: Type.Union([Type.Literal('TARGETING_MATCH'), Type.Literal('STATIC')], {
    description: 'TARGETING_MATCH for an override',
  }),
  variant: OfrepSource,
  // OFREP's metadata values are strings, numbers and booleans only: what would be null is left out.
  metadata: Type.Object({
    source: OfrepSource,
    kind: Type.Union([Type.Literal('flag'), Type.Literal('limit'), Type.Literal('metered')]),
    unlimited: Type.Optional(Type.Boolean({ description: 'limits and metered features' })),
    used: Type.Optional(Type.Integer({ minimum: 0, description: 'metered features: used this period' })),
    limit: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: 'metered features: the limit per period; absent when unlimited',
      }),
    ),
    resets_at: Type.Optional(
      Type.String({
        description: 'metered features: when the next period starts (ISO 8601 UTC); absent for reset "never"',
      }),
    ),
  }),
});
export type OfrepSuccess = Static<typeof OfrepSuccess>;

export const OfrepErrorCode = Type.Union([
  Type.Literal('PARSE_ERROR'),
  Type.Literal('TARGETING_KEY_MISSING'),
  Type.Literal('INVALID_CONTEXT'),
  Type.Literal('FLAG_NOT_FOUND'),
  Type.Literal('GENERAL'),
]);
export type OfrepErrorCode = Static<typeof OfrepErrorCode>;

export const OfrepFailure = Type.Object({
  key: Type.Optional(Type.String()),
  errorCode: OfrepErrorCode,
  errorDetails: Type.Optional(Type.String()),
});
export type OfrepFailure = Static<typeof OfrepFailure>;

export const OfrepBulkSuccess = Type.Object({ flags: Type.Array(OfrepSuccess) });
export type OfrepBulkSuccess = Static<typeof OfrepBulkSuccess>;
