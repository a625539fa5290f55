import { Command, Option } from 'commander';
import type { Kysely } from 'kysely';
import type { Config } from '@ent/common/config';
import type { Database } from '@ent/common/db/database';
import { createRedis } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import { systemClock } from '@ent/common/clock';
import type { MeteredCheckResult } from '@ent/contract/evals';
import { MAX_USAGE_AMOUNT } from '@ent/contract/metered-usage';
import { auditedWrite } from '../features/audit/service.ts';
import { currentUsage } from '../features/metered-usage/current-usage.ts';
import { correctUsage } from '../features/metered-usage/usage-service.ts';
import { operatorAuditEntry, organizationAdmin } from '../features/provisioning/operator-write.ts';
import { wholeNumber } from './arguments.ts';

export interface UsageCommandContext {
  config: Config;
  withDb: <T>(run: (db: Kysely<Database>) => Promise<T>) => Promise<T>;
  print: (json: boolean, value: Record<string, unknown>, human: string) => void;
}

/** The human table of `usage show`: one line per metered feature, columns aligned. */
function usageTable(subscriberId: string, usage: readonly MeteredCheckResult[]): string {
  const header = ['feature', 'used', 'limit', 'remaining', 'resets_at', 'source'];
  const rows = usage.map((entry) => [
    entry.feature,
    String(entry.used) + (entry.overage ? ` (overage ${entry.overage})` : ''),
    entry.limit === null ? 'unlimited' : String(entry.limit),
    entry.remaining === null ? '-' : String(entry.remaining),
    entry.resets_at ?? 'never',
    entry.source,
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => row[column]!.length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column]!))
      .join('  ')
      .trimEnd();
  if (rows.length === 0) return `subscriber ${subscriberId}: no metered features in the catalog`;
  return [`subscriber ${subscriberId}`, line(header), ...rows.map(line)].join('\n');
}

/** `entctl usage`: metered usage (DESIGN.md §5) read and corrected by the operator. */
export function usageCommand({ config, withDb, print }: UsageCommandContext): Command {
  const usage = new Command('usage').description(
    "Metered usage: each metered feature's current period, and corrections.",
  );

  usage
    .command('show')
    .description(
      "Every metered feature's current period for a subscriber (used, limit, remaining, resets_at), as " +
        'GET /org/subscribers/{id}/usage answers it: figures from Redis, else Postgres.',
    )
    .requiredOption('--org <id>', 'organization id (org_...)')
    .requiredOption('--subscriber <id>', 'subscriber id')
    .option('--json', 'print {subscriber_id, usage: [check result...]} as JSON')
    .action(async (options: { org: string; subscriber: string; json?: boolean }) => {
      const redis = createRedis(config);
      try {
        const read = await withDb((db) =>
          currentUsage(
            { db, redis, keys: redisKeys(config.redisKeyPrefix) },
            options.org,
            options.subscriber,
            Date.now(),
          ),
        );
        if (read.redisUnavailable) {
          process.stderr.write(
            'entctl: Redis could not be reached: figures from Postgres (up to about a second old)\n',
          );
        }
        print(Boolean(options.json), { ...read.body }, usageTable(options.subscriber, read.body.usage));
      } finally {
        redis.disconnect();
      }
    });

  usage
    .command('set')
    .description(
      "Correct a subscriber's use of a metered feature in its current period, as PUT " +
        '/org/subscribers/{id}/usage/{feature} does: applied on the next eval on every gateway, audited from -> to as ' +
        "the organization's admin service account (user agent entctl).",
    )
    .requiredOption('--org <id>', 'organization id (org_...)')
    .requiredOption('--subscriber <id>', 'subscriber id')
    .requiredOption('--feature <key>', 'metered feature key')
    .addOption(
      new Option('--used <n>', "the period's figure from now on")
        .argParser(wholeNumber(0, MAX_USAGE_AMOUNT))
        .makeOptionMandatory(),
    )
    .option('--json', 'print the check result after the correction as JSON')
    .action(
      async (options: { org: string; subscriber: string; feature: string; used: number; json?: boolean }) => {
        const redis = createRedis(config);
        try {
          const result = await withDb(async (db) => {
            const { principal } = await organizationAdmin(db, options.org);
            const deps = { db, redis, redisKeys: redisKeys(config.redisKeyPrefix), clock: systemClock };
            const entry = operatorAuditEntry(
              principal,
              {
                service: 'api',
                method: 'PUT',
                route: '/org/subscribers/{subscriber_id}/usage/{feature}',
                params: { subscriber_id: options.subscriber, feature: options.feature },
              },
              new Date(),
            );
            return auditedWrite(db, entry, 200, (outcome) =>
              correctUsage(
                deps,
                (work) => db.transaction().execute((trx) => work(trx, outcome)),
                {
                  error: (...logged: unknown[]) =>
                    process.stderr.write(`entctl: ${JSON.stringify(logged)}\n`),
                },
                options.org,
                options.subscriber,
                options.feature,
                options.used,
              ),
            );
          });
          print(Boolean(options.json), { ...result }, usageTable(options.subscriber, [result]));
        } finally {
          redis.disconnect();
        }
      },
    );

  return usage;
}
