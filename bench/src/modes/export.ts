/**
 * `npm run bench -- export`: `GET /org/export` of one organization (DESIGN.md §5; issue 36 asks for at least 50,000
 * records a second on a quiet machine), read to the end over HTTP from an admin process.
 *
 * The organization is the bench seed (its features and plans, BENCH_EXPORT_SUBSCRIBERS subscribers each with a
 * subscription, 10% with overrides). Reported per run (BENCH_EXPORT_RUNS, default 3, the first after a warm-up
 * export): records, wall seconds and records a second, and CPU per record of admin (user + system) and of the
 * Postgres backends of the bench database, the two sides the export's cost is in. Wall figures on a loaded machine
 * are noise; CPU per record is what compares across runs.
 */
import { loadavg } from 'node:os';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { createWorld, envNumber, healthy, log, median, processCpuSeconds, startNode } from '../harness.ts';

interface ExportRun {
  records: number;
  bytes: number;
  seconds: number;
  recordsPerSecond: number;
  adminCpuUsPerRecord: number;
  postgresCpuUsPerRecord: number;
}

export interface ExportResult {
  date: string;
  loadAverage: number;
  settings: { subscribers: number; features: number; plans: number; runs: number };
  runs: ExportRun[];
  median: Omit<ExportRun, 'records' | 'bytes'>;
}

/** CPU seconds of each Postgres backend connected to the database (their /proc entries are world-readable). */
async function backendCpu(ownerUrl: string, database: string): Promise<Map<number, number>> {
  const client = new pg.Client({ connectionString: ownerUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [database],
    );
    const cpu = new Map<number, number>();
    for (const { pid } of rows) {
      try {
        const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
        cpu.set(pid, (Number(fields[11]) + Number(fields[12])) / 100);
      } catch {
        // The backend ended between the query and the read.
      }
    }
    return cpu;
  } finally {
    await client.end();
  }
}

async function exportOnce(adminUrl: string, apiKey: string): Promise<{ records: number; bytes: number }> {
  const response = await fetch(`${adminUrl}/org/export`, { headers: { 'x-api-key': apiKey } });
  if (!response.ok || !response.body) throw new Error(`GET /org/export answered ${response.status}`);
  let records = 0;
  let bytes = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    bytes += chunk.length;
    for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) records += 1;
  }
  return { records, bytes };
}

export async function runExport(): Promise<ExportResult> {
  const shape = { features: 20, plans: 5, subscribers: envNumber('BENCH_EXPORT_SUBSCRIBERS', 100_000) };
  const runs = envNumber('BENCH_EXPORT_RUNS', 3);
  const world = await createWorld(shape);
  try {
    const admin = startNode('admin/src/server.ts', world.env);
    await healthy(`${world.adminUrl}/healthz`);
    const ownerUrl = world.env.DATABASE_OWNER_URL!;
    const database = new URL(ownerUrl).pathname.slice(1);
    await exportOnce(world.adminUrl, world.apiKey);
    const measured: ExportRun[] = [];
    for (let run = 0; run < runs; run++) {
      const pgBefore = await backendCpu(ownerUrl, database);
      const adminBefore = processCpuSeconds(admin.pid);
      const started = performance.now();
      const { records, bytes } = await exportOnce(world.adminUrl, world.apiKey);
      const seconds = (performance.now() - started) / 1000;
      const adminCpu = processCpuSeconds(admin.pid) - adminBefore;
      let pgCpu = 0;
      for (const [pid, cpu] of await backendCpu(ownerUrl, database)) pgCpu += cpu - (pgBefore.get(pid) ?? 0);
      const figures = {
        records,
        bytes,
        seconds,
        recordsPerSecond: records / seconds,
        adminCpuUsPerRecord: (adminCpu * 1e6) / records,
        postgresCpuUsPerRecord: (pgCpu * 1e6) / records,
      };
      log(
        `export ${run + 1}/${runs}: ${records} records (${(bytes / 1e6).toFixed(1)} MB) in ${seconds.toFixed(2)} s, ` +
          `${Math.round(figures.recordsPerSecond)} records/s; CPU per record: admin ` +
          `${figures.adminCpuUsPerRecord.toFixed(1)} µs, Postgres ${figures.postgresCpuUsPerRecord.toFixed(1)} µs`,
      );
      measured.push(figures);
    }
    const mid = (pick: (run: ExportRun) => number) => median(measured.map(pick));
    return {
      date: new Date().toISOString(),
      loadAverage: loadavg()[0]!,
      settings: { ...shape, runs },
      runs: measured,
      median: {
        seconds: mid((r) => r.seconds),
        recordsPerSecond: mid((r) => r.recordsPerSecond),
        adminCpuUsPerRecord: mid((r) => r.adminCpuUsPerRecord),
        postgresCpuUsPerRecord: mid((r) => r.postgresCpuUsPerRecord),
      },
    };
  } finally {
    await world.cleanup();
  }
}

export function renderExport(result: ExportResult): string {
  const { settings: s, median: m } = result;
  const records = result.runs[0]?.records ?? 0;
  return [
    `\`GET /org/export\` of ${s.subscribers.toLocaleString('en-US')} subscribers with their subscriptions ` +
      `(${records.toLocaleString('en-US')} records), read over HTTP from one admin process; median of ${s.runs} ` +
      `runs (${result.date.slice(0, 10)}, load average ${result.loadAverage.toFixed(1)}):`,
    '',
    '| records/s | wall | admin CPU per record | Postgres CPU per record |',
    '| --- | --- | --- | --- |',
    `| ${Math.round(m.recordsPerSecond).toLocaleString('en-US')} | ${m.seconds.toFixed(2)} s | ` +
      `${m.adminCpuUsPerRecord.toFixed(1)} µs | ${m.postgresCpuUsPerRecord.toFixed(1)} µs |`,
    '',
    `CPU bound: with a core each for admin and Postgres (they work in parallel) the export would run at about ` +
      `${Math.round(1e6 / Math.max(m.adminCpuUsPerRecord, m.postgresCpuUsPerRecord)).toLocaleString('en-US')} ` +
      'records a second (1e6 / the larger CPU per record); the wall figure says more about the load average than ' +
      'about the export.',
  ].join('\n');
}
