import type { TSchema } from '@sinclair/typebox';

/** Plain JSON Schema: TypeBox's symbol-keyed metadata and the `$id` used for registration left out. */
export const plain = (schema: TSchema): Record<string, unknown> => {
  const { $id: _id, ...rest } = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
  return rest;
};

/** A response (or request) whose body is `schema` as JSON. */
export const json = (schema: TSchema, description: string) => ({
  description,
  content: { 'application/json': { schema: plain(schema) } },
});

/** One OpenAPI parameter per property of a TypeBox object (path parameters are required). */
export const parametersOf = (where: 'path' | 'query', object: TSchema) =>
  Object.entries((object as unknown as { properties: Record<string, TSchema> }).properties).map(
    ([name, schema]) => ({
      in: where,
      name,
      required: where === 'path',
      schema: plain(schema),
      ...(schema.description === undefined ? {} : { description: schema.description }),
    }),
  );
