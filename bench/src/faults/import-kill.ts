import type pg from 'pg';
import { createDb } from '@ent/common/db/connect';
import { createOrganization } from '../../../admin/src/features/provisioning/create-organization.ts';
import { sleep } from './http.ts';
import { IMPORT_FAULT_BATCH, type Services } from './services.ts';

const SUBSCRIBERS = 20_000;
const BOUND_MS = 180_000;

interface ImportState {
  status: string;
  applied: number;
  failed: number;
}

async function importState(adminUrl: string, apiKey: string, id: string): Promise<ImportState> {
  const res = await fetch(`${adminUrl}/org/imports/${id}`, { headers: { 'x-api-key': apiKey } });
  if (res.status !== 200) throw new Error(`GET /org/imports/${id} answered ${res.status}`);
  return (await res.json()) as ImportState;
}

/**
 * The import's applied lines and the subscriber and subscription rows of its organization, in one statement and so one
 * snapshot: a killed process's last COMMIT may still land after the kill, and read in two statements it could fall
 * between them (seen once: 798 rows for 600 applied lines, one batch of 200 apart).
 */
async function appliedAndRows(pool: pg.Pool, importId: string): Promise<{ applied: number; rows: number }> {
  const { rows } = await pool.query<{ applied: number; present: string }>(
    `SELECT i.applied,
            (SELECT count(*) FROM subscribers WHERE organization_id = i.organization_id)
          + (SELECT count(*) FROM subscriptions WHERE organization_id = i.organization_id) AS present
     FROM imports i WHERE i.id = $1`,
    [importId],
  );
  return { applied: rows[0]!.applied, rows: Number(rows[0]!.present) };
}

/** What every gateway answers for an imported subscriber once the import says `succeeded` (read-your-writes). */
async function servedByEveryGateway(services: Services, apiKey: string, subscriberId: string): Promise<void> {
  for (const url of services.gatewayUrls) {
    const res = await fetch(`${url}/org/subscribers/${subscriberId}/entitlements/check`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ feature: 'seats' }),
    });
    const body = (await res.json()) as { kind?: string; limit?: number | null; source?: string };
    if (res.status !== 200 || body.kind !== 'limit' || body.limit !== 5 || body.source !== 'plan')
      throw new Error(
        `${url} answered ${res.status} ${JSON.stringify(body)} for ${subscriberId} after succeeded`,
      );
  }
}

/**
 * Admin or worker kill -9 in the middle of an import (DESIGN.md §5): in Postgres only whole batches (every applied
 * line's row and nothing else); then, restarted, the import resumes (admin: once its lease has expired) or goes on,
 * to `succeeded` with every line applied once, and every gateway serves the last subscriber imported under its plan.
 * Throws, failing the row, when any of these does not hold.
 */
export async function killMidImport(
  services: Services,
  appUrl: string,
  pool: pg.Pool,
  victim: 'admin' | 'worker',
): Promise<void> {
  const db = createDb(appUrl, { max: 1 });
  const org = await createOrganization(db, 'Import killed').finally(() => db.destroy());
  const lines = [
    JSON.stringify({ type: 'feature', key: 'seats', name: 'Seats', kind: 'limit' }),
    JSON.stringify({
      type: 'plan',
      key: 'basic',
      name: 'Basic',
      kind: 'catalog',
      grants: [{ feature: 'seats', kind: 'limit', limit: 5 }],
    }),
  ];
  for (let i = 0; i < SUBSCRIBERS; i++) {
    lines.push(
      `{"type":"subscriber","subscriber_id":"imp-${i}"}`,
      `{"type":"subscription","subscriber_id":"imp-${i}","plan_id":"basic"}`,
    );
  }
  const posted = await fetch(`${services.adminUrl}/org/imports`, {
    method: 'POST',
    headers: { 'x-api-key': org.api_key, 'content-type': 'application/x-ndjson' },
    body: lines.join('\n'),
  });
  if (posted.status !== 202)
    throw new Error(`POST /org/imports answered ${posted.status}: ${await posted.text()}`);
  const { import_id: id } = (await posted.json()) as { import_id: string };
  const deadline = Date.now() + BOUND_MS;
  while ((await importState(services.adminUrl, org.api_key, id)).applied < IMPORT_FAULT_BATCH * 3) {
    if (Date.now() > deadline) throw new Error('the import applied nothing before its bound');
    await sleep(20);
  }
  await services[victim].kill9();
  const killed = await appliedAndRows(pool, id);
  // The catalog's two lines made no subscriber or subscription row.
  if (killed.rows !== killed.applied - 2)
    throw new Error(`after the kill: ${killed.rows} rows for ${killed.applied} applied lines (a half batch)`);
  await sleep(1000);
  await services[victim].start();
  let state = await importState(services.adminUrl, org.api_key, id);
  while (state.status === 'running') {
    if (Date.now() > deadline) throw new Error(`the import did not resume within ${BOUND_MS} ms`);
    await sleep(250);
    state = await importState(services.adminUrl, org.api_key, id);
  }
  if (state.status !== 'succeeded' || state.applied !== lines.length || state.failed !== 0)
    throw new Error(`the resumed import ended ${JSON.stringify(state)}`);
  if ((await appliedAndRows(pool, id)).rows !== SUBSCRIBERS * 2)
    throw new Error('the resumed import left another number of rows than its lines');
  await servedByEveryGateway(services, org.api_key, `imp-${SUBSCRIBERS - 1}`);
}
