import { Command, Option } from 'commander';
import type { Kysely } from 'kysely';
import type { Config } from '@ent/common/config';
import type { Database } from '@ent/common/db/database';
import { transact } from '@ent/common/outbox/record';
import { createRedis, type RedisClient } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import { assertValidBody } from '@ent/common/http/validation';
import {
  CreateCreditBody,
  DEFAULT_CREDIT_PRIORITY,
  MAX_CREDIT_AMOUNT,
  type CreditBody,
  type CreditStatus,
} from '@ent/contract/credits';
import { auditedWrite } from '../features/audit/service.ts';
import { toCreditBody } from '../features/credits/body.ts';
import { createCredit, listSubscriberCredits, voidCredit } from '../features/credits/service.ts';
import { operatorAuditEntry, organizationAdmin } from '../features/provisioning/operator-write.ts';
import type { WriteOutcome } from '../features/shared/write/outcome.ts';
import { createSnapshotPublisher } from '../features/snapshots/publisher.ts';
import { recordDeliveries } from '../features/webhook/dispatch.ts';
import { wholeNumber } from './arguments.ts';
import type { UsageCommandContext } from './usage.ts';

const STATUSES: CreditStatus[] = ['scheduled', 'active', 'spent', 'expired', 'voided'];
const ROUTE = '/org/subscribers/{subscriber_id}/credits';

/** The human table of `credits list`: one line per credit, columns aligned, as `usage show` prints. */
function creditTable(subscriberId: string, credits: readonly CreditBody[]): string {
  if (credits.length === 0) return `subscriber ${subscriberId}: no credits`;
  const header = ['credit_id', 'feature', 'remaining', 'amount', 'priority', 'expires_at', 'status', 'name'];
  const rows = credits.map((credit) => [
    credit.credit_id,
    credit.feature,
    String(credit.remaining),
    String(credit.amount),
    String(credit.priority),
    credit.expires_at ?? 'never',
    credit.status,
    credit.name ?? '',
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row[column]!.length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column]!))
      .join('  ')
      .trimEnd();
  return [`subscriber ${subscriberId}`, line(header), ...rows.map(line)].join('\n');
}

/**
 * A credit write as its route makes it, as the organization's admin service account (user agent entctl): audited,
 * its webhook deliveries recorded in its transaction (the worker's sweep sends them), then the subscriber's
 * document published so the next eval on every gateway sees it (else the worker's relay publishes it).
 */
async function operatorCreditWrite<T>(
  config: Config,
  db: Kysely<Database>,
  redis: RedisClient,
  request: { method: 'POST' | 'DELETE'; route: string; params: Record<string, string>; status: number },
  organizationId: string,
  subscriberId: string,
  write: (trx: Parameters<typeof createCredit>[0], outcome: WriteOutcome) => Promise<T>,
): Promise<T> {
  const { principal } = await organizationAdmin(db, organizationId);
  const now = new Date();
  const entry = operatorAuditEntry(
    principal,
    { service: 'api', method: request.method, route: request.route, params: request.params },
    now,
  );
  const result = await auditedWrite(db, entry, request.status, (outcome) =>
    transact(db, async (trx) => {
      const written = await write(trx, outcome);
      if (outcome.events.length > 0) await recordDeliveries(trx, organizationId, outcome.events, now);
      return written;
    }),
  );
  const publisher = createSnapshotPublisher({ db, redis, redisKeys: redisKeys(config.redisKeyPrefix) });
  await publisher.publishSubscribers(organizationId, [subscriberId]).catch((error: unknown) => {
    process.stderr.write(
      `entctl: saved; Redis could not be reached (${(error as Error).message}): ` +
        'the worker will publish the change once it can\n',
    );
  });
  return result;
}

/** `entctl credits`: a subscriber's credits on metered features (docs/credits.md), as the routes do. */
export function creditsCommand({ config, withDb, print }: UsageCommandContext): Command {
  const credits = new Command('credits').description(
    "Credits on metered features: top-ups and promotions added to a subscriber's allowance, spent after it.",
  );

  credits
    .command('list')
    .description(
      "A subscriber's credits, newest first, as GET /org/subscribers/{id}/credits answers them: remaining from " +
        "Redis's spent figure where it holds one, else Postgres's.",
    )
    .requiredOption('--org <id>', 'organization id (org_...)')
    .requiredOption('--subscriber <id>', 'subscriber id')
    .option('--feature <key>', 'only the credits of this metered feature')
    .addOption(new Option('--status <status>', 'only credits with this status').choices(STATUSES))
    .option('--json', 'print {credits: [credit...]} as JSON')
    .action(
      async (options: {
        org: string;
        subscriber: string;
        feature?: string;
        status?: CreditStatus;
        json?: boolean;
      }) => {
        const redis = createRedis(config);
        try {
          const listed: CreditBody[] = [];
          await withDb(async (db) => {
            const deps = { db, redis, redisKeys: redisKeys(config.redisKeyPrefix) };
            let startingAfter: string | undefined;
            // Every page: at most MAX_LIVE_CREDITS_PER_FEATURE live per feature, so a list stays small.
            for (;;) {
              const page = await listSubscriberCredits(
                deps,
                options.org,
                options.subscriber,
                { limit: 100, startingAfter, feature: options.feature, status: options.status },
                Date.now(),
              );
              listed.push(...page.items);
              if (!page.hasMore || page.items.length === 0) break;
              startingAfter = page.items.at(-1)!.credit_id;
            }
          });
          print(Boolean(options.json), { credits: listed }, creditTable(options.subscriber, listed));
        } finally {
          redis.disconnect();
        }
      },
    );

  credits
    .command('add')
    .description(
      'Add a credit as POST /org/subscribers/{id}/credits does: read on every gateway from the next eval on, ' +
        "audited and sent as credit.created, as the organization's admin service account (user agent entctl).",
    )
    .requiredOption('--org <id>', 'organization id (org_...)')
    .requiredOption('--subscriber <id>', 'subscriber id')
    .requiredOption('--feature <key>', 'metered feature key')
    .addOption(
      new Option('--amount <n>', 'in the feature’s unit')
        .argParser(wholeNumber(1, MAX_CREDIT_AMOUNT))
        .makeOptionMandatory(),
    )
    .addOption(
      new Option('--priority <n>', `1 is spent first; default ${DEFAULT_CREDIT_PRIORITY}`).argParser(
        wholeNumber(1, 100),
      ),
    )
    .option('--effective-at <instant>', 'ISO 8601; default now')
    .option('--expires-at <instant>', 'ISO 8601, after --effective-at; default never')
    .option('--name <text>', 'e.g. the invoice of a paid top-up')
    .option('--json', 'print the credit as JSON')
    .action(
      async (options: {
        org: string;
        subscriber: string;
        feature: string;
        amount: number;
        priority?: number;
        effectiveAt?: string;
        expiresAt?: string;
        name?: string;
        json?: boolean;
      }) => {
        const body: CreateCreditBody = {
          feature: options.feature,
          amount: options.amount,
          ...(options.priority === undefined ? {} : { priority: options.priority }),
          ...(options.effectiveAt === undefined ? {} : { effective_at: options.effectiveAt }),
          ...(options.expiresAt === undefined ? {} : { expires_at: options.expiresAt }),
          ...(options.name === undefined ? {} : { name: options.name }),
        };
        // As the route refuses it (an empty or over-long name, a date-time without its offset, which would be read
        // in this machine's zone): a credit the API would not take is not made here either.
        assertValidBody(CreateCreditBody, body);
        const redis = createRedis(config);
        try {
          const credit = await withDb(async (db) => {
            const nowMs = Date.now();
            const created = await operatorCreditWrite(
              config,
              db,
              redis,
              { method: 'POST', route: ROUTE, params: { subscriber_id: options.subscriber }, status: 201 },
              options.org,
              options.subscriber,
              (trx, outcome) => createCredit(trx, outcome, options.org, options.subscriber, body, nowMs),
            );
            // A credit just made has spent nothing yet.
            return toCreditBody(created, 0, nowMs);
          });
          print(Boolean(options.json), { ...credit }, creditTable(options.subscriber, [credit]));
        } finally {
          redis.disconnect();
        }
      },
    );

  credits
    .command('void')
    .description(
      'Void a credit as DELETE /org/subscribers/{id}/credits/{credit_id} does: what it gave stays spent; voiding ' +
        'it again changes nothing. Audited and sent as credit.voided.',
    )
    .requiredOption('--org <id>', 'organization id (org_...)')
    .requiredOption('--subscriber <id>', 'subscriber id')
    .requiredOption('--credit <id>', 'credit id (cr_...)')
    .option('--json', 'print the credit as JSON')
    .action(async (options: { org: string; subscriber: string; credit: string; json?: boolean }) => {
      const redis = createRedis(config);
      try {
        const credit = await withDb((db) =>
          operatorCreditWrite(
            config,
            db,
            redis,
            {
              method: 'DELETE',
              route: `${ROUTE}/{credit_id}`,
              params: { subscriber_id: options.subscriber, credit_id: options.credit },
              status: 200,
            },
            options.org,
            options.subscriber,
            (trx, outcome) =>
              voidCredit(
                trx,
                outcome,
                { redis, redisKeys: redisKeys(config.redisKeyPrefix) },
                options.org,
                options.subscriber,
                options.credit,
                Date.now(),
              ),
          ),
        );
        print(Boolean(options.json), { ...credit }, creditTable(options.subscriber, [credit]));
      } finally {
        redis.disconnect();
      }
    });

  return credits;
}
