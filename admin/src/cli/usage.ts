import { Command } from 'commander';
import type { Kysely } from 'kysely';
import type { Config } from '@ent/common/config';
import type { Database } from '@ent/common/db/database';
import { createRedis } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import type { MeteredCheckResult } from '@ent/contract/evals';
import { currentUsage } from '../features/metered-usage/current-usage.ts';

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

  return usage;
}
