import { Type, type Static } from '@sinclair/typebox';
import { ErrorBodySchema, NullableTimestamp, PaginationQuery, Timestamp, listOf } from './common.ts';

/**
 * DESIGN.md §5, "Import and export": an NDJSON body of records, one a line, upserted by natural key.
 * A line is `{"type": <RecordType>, ...the fields of the record's single-write route}`; subscriptions,
 * overrides and credits also carry `subscriber_id`.
 */

/** Largest import body. */
export const MAX_IMPORT_BYTES = 1024 ** 3;
/** Errors kept on the import itself; every line's result is at `/lines`. */
export const MAX_IMPORT_ERRORS = 1000;

export const ImportRecordTypeSchema = Type.Union([
  Type.Literal('feature'),
  Type.Literal('plan'),
  Type.Literal('subscriber'),
  Type.Literal('subscription'),
  Type.Literal('override'),
  Type.Literal('credit'),
]);
export type ImportRecordType = Static<typeof ImportRecordTypeSchema>;

export const ImportStatusSchema = Type.Union([
  Type.Literal('running'),
  Type.Literal('succeeded'),
  Type.Literal('failed', { description: 'stopped before the end: `applied` says what was applied' }),
]);
export type ImportStatus = Static<typeof ImportStatusSchema>;

const ImportErrorSchema = Type.Object({
  line: Type.Integer({ minimum: 1 }),
  error: ErrorBodySchema.properties.error,
});

export const ImportSchema = Type.Object(
  {
    import_id: Type.String({ description: '`imp_` and a random suffix' }),
    status: ImportStatusSchema,
    dry_run: Type.Boolean(),
    lines: Type.Integer({ minimum: 0, description: 'lines read so far' }),
    applied: Type.Integer({ minimum: 0, description: 'lines that created or changed something' }),
    unchanged: Type.Integer({ minimum: 0, description: 'lines equal to what was there' }),
    failed: Type.Integer({ minimum: 0 }),
    errors: Type.Array(ImportErrorSchema, { description: `the first ${MAX_IMPORT_ERRORS}` }),
    sha256: Type.Union([Type.String(), Type.Null()], { description: "the body's, once read to the end" }),
    failure: Type.Optional(
      Type.String({ description: 'why a `failed` import stopped; `applied` and `/lines` say what was applied' }),
    ),
    created_at: Timestamp,
    finished_at: NullableTimestamp,
  },
  { $id: 'Import' },
);
export type ImportBody = Static<typeof ImportSchema>;

export const CreateImportQuery = Type.Object(
  { dry_run: Type.Optional(Type.Boolean({ default: false, description: 'validate only' })) },
  { additionalProperties: false },
);
export type CreateImportQuery = Static<typeof CreateImportQuery>;

export const ImportAcceptedSchema = Type.Object({ import_id: Type.String(), status: ImportStatusSchema });

export const ImportParams = Type.Object({ import_id: Type.String({ minLength: 1, maxLength: 255 }) });
export type ImportParams = Static<typeof ImportParams>;

export const ImportLineResultSchema = Type.Union([
  Type.Literal('applied'),
  Type.Literal('unchanged'),
  Type.Literal('failed'),
]);

export const ImportLineSchema = Type.Object({
  line: Type.Integer({ minimum: 1 }),
  type: Type.Union([ImportRecordTypeSchema, Type.Null()], { description: 'null when the line is not a record' }),
  key: Type.Union([Type.String(), Type.Null()], { description: "the record's natural key" }),
  result: ImportLineResultSchema,
  error: Type.Optional(ErrorBodySchema.properties.error),
});

export const ListImportLinesQuery = Type.Object(
  {
    limit: PaginationQuery.limit,
    starting_after: Type.Optional(Type.Integer({ minimum: 0, description: 'a line number' })),
    result: Type.Optional(ImportLineResultSchema),
  },
  { additionalProperties: false },
);
export type ListImportLinesQuery = Static<typeof ListImportLinesQuery>;

export const ImportLineListSchema = listOf('lines', ImportLineSchema);
