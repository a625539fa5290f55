import { createHash } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import type { Kysely } from 'kysely';
import type { Scope } from '@ent/common/auth/scopes';
import type { Database } from '@ent/common/db/database';
import { AppError } from '@ent/common/errors/app-error';
import { MAX_LINE_BYTES, parseLine } from './parse-line.ts';
import { stageLines, type StagedLine } from './store.ts';

/** Lines staged per insert while the body streams in (as many as a batch applies: fewer statements per line). */
const STAGE_CHUNK = 5000;

export interface ReceiveContext {
  db: Kysely<Database>;
  importId: string;
  requestId: string;
  scopes: ReadonlySet<Scope>;
  leaseMs: number;
  maxBytes: number;
}

/**
 * What the route's handler gets as its body once the stream is staged (the route's body schema, so the strict
 * routes' rule of "no declared body, no body" does not apply; the NDJSON itself is documented in openapi-imports.ts).
 */
export const ReceivedSchema = Type.Object({
  sha256: Type.String(),
  bytes: Type.Integer({ minimum: 0 }),
  /** Lines holding something (blank lines are skipped, and still numbered). */
  lines: Type.Integer({ minimum: 0 }),
});
export type Received = Static<typeof ReceivedSchema>;

export const bodyTooLarge = (maxBytes: number) =>
  new AppError(413, 'PAYLOAD_TOO_LARGE', `The import body is larger than ${maxBytes} bytes; split it.`, {
    max_bytes: maxBytes,
  });

const lineTooLong = new AppError(
  413,
  'PAYLOAD_TOO_LARGE',
  `The line is longer than ${MAX_LINE_BYTES} bytes.`,
  {
    field: 'line',
    max_bytes: MAX_LINE_BYTES,
  },
);

/**
 * Reads an NDJSON body chunk by chunk (never whole: at most one line and two chunks of staged lines are held), hashes
 * it, checks each line as its single route would (parse-line.ts) and stages it in import_lines: valid records to
 * apply, refused lines with their error. One staging insert runs while the next chunk is checked, and the chunk
 * after waits for it, so a slow database slows the upload.
 */
export async function receiveImport(body: AsyncIterable<Buffer>, ctx: ReceiveContext): Promise<Received> {
  const hash = createHash('sha256');
  let bytes = 0;
  let lineNumber = 0;
  let lines = 0;
  let parts: Buffer[] = [];
  let partBytes = 0;
  let oversized = false;
  let staged: StagedLine[] = [];

  // One insert in flight while the next chunk is read and checked: Postgres stages one chunk while admin parses the
  // next, and a slow database still slows the upload (a chunk waits for the insert before it).
  let staging: Promise<void> = Promise.resolve();
  const flush = async () => {
    await staging;
    if (staged.length === 0) return;
    staging = stageLines(ctx.db, ctx.importId, staged, ctx.leaseMs);
    // Awaited by the next flush, or the last one; until then its rejection is held, not unhandled.
    staging.catch(() => {});
    staged = [];
  };
  const failedLine = (
    error: AppError,
    type: string | null = null,
    key: string | null = null,
  ): StagedLine => ({
    line: lineNumber,
    type,
    key,
    record: null,
    result: 'failed',
    error: error.toBody(ctx.requestId).error as unknown as Record<string, unknown>,
  });

  const endLine = async () => {
    lineNumber++;
    if (oversized) {
      staged.push(failedLine(lineTooLong));
      lines++;
    } else {
      let text = Buffer.concat(parts, partBytes).toString('utf8');
      if (text.endsWith('\r')) text = text.slice(0, -1);
      // A byte order mark some editors write: not part of the first record (the hash still covers the bytes sent).
      if (lineNumber === 1 && text.startsWith('\uFEFF')) text = text.slice(1);
      if (text.trim() !== '') {
        lines++;
        const parsed = parseLine(text, ctx.scopes);
        staged.push(
          parsed.ok
            ? {
                line: lineNumber,
                type: parsed.type,
                key: parsed.key,
                record: parsed.record as unknown as Record<string, unknown>,
                result: 'pending',
                error: null,
              }
            : failedLine(parsed.error, parsed.type, parsed.key),
        );
      }
    }
    parts = [];
    partBytes = 0;
    oversized = false;
    if (staged.length >= STAGE_CHUNK) await flush();
  };

  try {
    for await (const chunk of body) {
      bytes += chunk.length;
      if (bytes > ctx.maxBytes) throw bodyTooLarge(ctx.maxBytes);
      hash.update(chunk);
      let start = 0;
      for (;;) {
        const newline = chunk.indexOf(10, start);
        const end = newline === -1 ? chunk.length : newline;
        if (!oversized && end > start) {
          if (partBytes + (end - start) > MAX_LINE_BYTES) {
            oversized = true;
            parts = [];
            partBytes = 0;
          } else {
            parts.push(chunk.subarray(start, end));
            partBytes += end - start;
          }
        }
        if (newline === -1) break;
        await endLine();
        start = newline + 1;
      }
    }
    if (partBytes > 0 || oversized) await endLine();
    await flush();
    await staging;
  } catch (error) {
    // Nothing of this request may still be writing once it answers (the route removes what it staged).
    await staging.catch(() => {});
    throw error;
  }
  return { sha256: hash.digest('hex'), bytes, lines };
}
