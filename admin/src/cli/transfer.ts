import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable, Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Command, Option } from 'commander';
import { SingleBar, Presets } from 'cli-progress';
import type { ImportBody } from '@ent/contract/imports';
import { EXPORT_CONTENT_TYPE } from '@ent/contract/exports';
import { errorLine } from './error-line.ts';

/**
 * `entctl import` and `entctl export` (DESIGN.md §5) go through admin's API, as any client of it: the import runs in
 * admin (its batches, lease, audit entry and publishing), and the key's scopes and the audit log apply to both.
 * The key is read from ENT_API_KEY, never from the command line (where `ps` and shell history would keep it).
 */
export interface TransferContext {
  adminUrl: string;
  print: (json: boolean, value: Record<string, unknown>, human: string) => void;
}

interface CommonOptions {
  url: string;
  json?: boolean;
  quiet?: boolean;
}

const POLL_MS = 500;

class CommandFailed extends Error {}

function apiKey(): string {
  const key = process.env.ENT_API_KEY;
  if (!key) throw new CommandFailed('set ENT_API_KEY to an API key of the organization');
  return key;
}

async function failure(response: Response, what: string): Promise<CommandFailed> {
  const text = await response.text();
  let detail = text;
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string } };
    if (body.error) detail = `${body.error.code}: ${body.error.message}`;
  } catch {
    // Not the API's error body (a proxy's page): shown as it came.
  }
  return new CommandFailed(`${what} answered ${response.status}: ${detail}`);
}

/** A bar on a terminal only: scripts (a pipe, --json, --quiet) get the result alone. */
function progressBar(options: CommonOptions, format: string): SingleBar | null {
  if (options.quiet || options.json || !process.stderr.isTTY) return null;
  return new SingleBar(
    { format, stream: process.stderr, hideCursor: true, etaBuffer: 50 },
    Presets.shades_classic,
  );
}

/** Counts newline bytes as they pass: lines uploaded (import) or records written (export). */
function lineCounter(onLines: (total: number) => void): Transform {
  let lines = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines += 1;
      onLines(lines);
      done(null, chunk);
    },
  });
}

async function runExport(
  context: TransferContext,
  options: CommonOptions & { output?: string },
): Promise<void> {
  const started = Date.now();
  const response = await fetchAnswered(new URL('/org/export', options.url), {
    headers: { 'x-api-key': apiKey(), accept: EXPORT_CONTENT_TYPE },
  });
  if (!response.ok || !response.body) throw await failure(response, 'GET /org/export');
  // Records stream to stdout when no file is named: then only the bar (on a terminal) and errors go to stderr.
  const toStdout = options.output === undefined;
  const bar = progressBar(options, ' export |{bar}| {value} records | {speed} records/s');
  bar?.start(0, 0, { speed: 0 });
  let records = 0;
  const counter = lineCounter((lines) => {
    records = lines;
    if (bar) {
      bar.setTotal(lines);
      bar.update(lines, { speed: Math.round(lines / Math.max((Date.now() - started) / 1000, 0.001)) });
    }
  });
  const sink: Writable = toStdout ? process.stdout : createWriteStream(options.output!);
  try {
    await pipeline(Readable.fromWeb(response.body as never), counter, sink, { end: !toStdout });
  } finally {
    bar?.stop();
  }
  const seconds = (Date.now() - started) / 1000;
  if (toStdout) {
    if (options.json) process.stderr.write(`${JSON.stringify({ records, output: null, seconds })}\n`);
    return;
  }
  report(
    context,
    options,
    { records, output: options.output, seconds },
    () => `exported ${records} records to ${options.output} in ${seconds.toFixed(1)} s`,
  );
}

/** --json prints the value; --quiet nothing; otherwise the human summary. */
function report(
  context: TransferContext,
  options: CommonOptions,
  value: Record<string, unknown>,
  human: () => string,
): void {
  if (options.json) context.print(true, value, '');
  else if (!options.quiet) context.print(false, value, human());
}

/** How long entctl waits for an answer's headers (not its body: an export streams for as long as it takes). */
const ANSWER_WITHIN_MS = 30_000;

/** `fetch`, ended when no answer's headers came within ANSWER_WITHIN_MS (a service that accepts and never answers). */
async function fetchAnswered(target: URL, init: RequestInit): Promise<Response> {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new Error(`no answer from ${target.origin} within ${ANSWER_WITHIN_MS / 1000} s`)),
    ANSWER_WITHIN_MS,
  );
  try {
    return await fetch(target, { ...init, signal: controller.signal });
  } finally {
    clearTimeout(timer);
  }
}

async function readImport(url: string, importId: string): Promise<ImportBody> {
  const response = await fetchAnswered(new URL(`/org/imports/${encodeURIComponent(importId)}`, url), {
    headers: { 'x-api-key': apiKey() },
  });
  if (!response.ok) throw await failure(response, `GET /org/imports/${importId}`);
  return (await response.json()) as ImportBody;
}

async function runImport(
  context: TransferContext,
  file: string,
  options: CommonOptions & { dryRun?: boolean },
): Promise<boolean> {
  const info = await stat(file);
  // A directory would fail later, inside the upload's stream, as an unhandled error event with a stack trace.
  if (!info.isFile()) throw new Error(`${file} is not a file`);
  const size = info.size;
  const bar = progressBar(options, ' {phase} |{bar}| {percentage}% | {value}/{total} {unit}');
  let uploadedLines = 0;
  bar?.start(size, 0, { phase: 'upload', unit: 'bytes' });
  let sent = 0;
  const body = createReadStream(file).pipe(
    lineCounter((lines) => {
      uploadedLines = lines;
    }),
  );
  body.on('data', (chunk: Buffer) => {
    sent += chunk.length;
    bar?.update(sent);
  });
  const target = new URL('/org/imports', options.url);
  if (options.dryRun) target.searchParams.set('dry_run', 'true');
  let response: Response;
  try {
    response = await fetch(target, {
      method: 'POST',
      headers: { 'x-api-key': apiKey(), 'content-type': EXPORT_CONTENT_TYPE, 'content-length': String(size) },
      body: Readable.toWeb(body) as never,
      duplex: 'half',
    } as RequestInit);
  } catch (error) {
    bar?.stop();
    throw error;
  }
  if (response.status !== 202) {
    bar?.stop();
    throw await failure(response, 'POST /org/imports');
  }
  const { import_id: importId } = (await response.json()) as { import_id: string };
  bar?.setTotal(Math.max(uploadedLines, 1));
  bar?.update(0, { phase: 'apply ', unit: 'lines' });
  let state = await readImport(options.url, importId);
  while (state.status === 'running') {
    bar?.setTotal(Math.max(uploadedLines, state.lines, 1));
    bar?.update(state.lines);
    await sleep(POLL_MS);
    state = await readImport(options.url, importId);
  }
  bar?.update(state.lines);
  bar?.stop();
  const ok = state.status === 'succeeded' && state.failed === 0;
  const firstErrors = state.errors
    .slice(0, 10)
    .map(({ line, error }) => `  line ${line}: ${error.code} ${error.message}`);
  report(context, { ...options, quiet: options.quiet && ok }, { ...state }, () =>
    [
      `import ${state.import_id} ${state.status}${state.dry_run ? ' (dry run)' : ''}: ${state.lines} lines, ` +
        `${state.applied} applied, ${state.unchanged} unchanged, ${state.failed} failed`,
      ...firstErrors,
      ...(state.failed > firstErrors.length
        ? [`  every line's result: GET /org/imports/${state.import_id}/lines?result=failed`]
        : []),
    ].join('\n'),
  );
  return ok;
}

/** Runs a command's action: a failure is one line on stderr and exit status 1, not a stack trace. */
function guarded<A extends unknown[]>(action: (...args: A) => Promise<boolean | void>) {
  return async (...args: A) => {
    try {
      if ((await action(...args)) === false) process.exitCode = 1;
    } catch (error) {
      process.stderr.write(errorLine(error));
      process.exitCode = 1;
    }
  };
}

export function transferCommands(context: TransferContext): Command[] {
  const urlOption = () =>
    new Option('--url <url>', "admin's address (ADMIN_URL); the key is read from ENT_API_KEY").default(
      context.adminUrl,
    );

  const exportCommand = new Command('export')
    .description(
      'Write the organization of the key in ENT_API_KEY as NDJSON (GET /org/export): features, plans, subscribers, ' +
        'subscriptions, overrides and credits, one record a line, what `entctl import` takes back.',
    )
    .option('--output <file>', 'write the records to this file (default: standard output)')
    .addOption(urlOption())
    .option('--quiet', 'no progress bar and no summary')
    .option(
      '--json',
      'print {records, output, seconds} as JSON (on stderr, output null, when the records go to stdout)',
    )
    .action(guarded((options: CommonOptions & { output?: string }) => runExport(context, options)));

  const importCommand = new Command('import')
    .description(
      'Import an NDJSON file into the organization of the key in ENT_API_KEY (POST /org/imports) and wait for it ' +
        'to finish; exits 1 when the import failed or any line failed.',
    )
    .argument('<file>', 'NDJSON, one record a line (as `entctl export` writes)')
    .option('--dry-run', 'validate every line and apply nothing')
    .addOption(urlOption())
    .option('--quiet', 'no progress bar; a summary only when something failed')
    .option('--json', 'print the finished import (GET /org/imports/{id}) as JSON')
    .action(
      guarded((file: string, options: CommonOptions & { dryRun?: boolean }) =>
        runImport(context, file, options),
      ),
    );

  return [importCommand, exportCommand];
}
