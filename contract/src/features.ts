import { Type, type Static } from '@sinclair/typebox';
import { FEATURE_KEY_PATTERN, PaginationQuery, Timestamp, listOf } from './common.ts';

export const FeatureKindSchema = Type.Union([
  Type.Literal('flag'),
  Type.Literal('limit'),
  Type.Literal('metered', { description: 'a limit whose use is counted per period (DESIGN.md §5)' }),
]);

export const FeatureSchema = Type.Object(
  {
    key: Type.String(),
    name: Type.String(),
    description: Type.String(),
    kind: FeatureKindSchema,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Feature' },
);
export type FeatureBody = Static<typeof FeatureSchema>;

export const FeatureKeyParams = Type.Object({ key: Type.String({ minLength: 1, maxLength: 255 }) });

export const CreateFeatureBody = Type.Object(
  {
    key: Type.String({
      pattern: FEATURE_KEY_PATTERN,
      description: 'lowercase letters, digits, _ . : -; at most 64',
    }),
    name: Type.String({ minLength: 1, maxLength: 255 }),
    kind: FeatureKindSchema,
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
  },
  { additionalProperties: false },
);
export type CreateFeatureBody = Static<typeof CreateFeatureBody>;

export const UpdateFeatureBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
  },
  { additionalProperties: false },
);
export type UpdateFeatureBody = Static<typeof UpdateFeatureBody>;

export const ListFeaturesQuery = Type.Object(
  { ...PaginationQuery, kind: Type.Optional(FeatureKindSchema) },
  { additionalProperties: false },
);
export type ListFeaturesQuery = Static<typeof ListFeaturesQuery>;

export const FeatureListSchema = listOf('features', FeatureSchema);
