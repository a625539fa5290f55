import { Command, InvalidArgumentError, Option } from 'commander';
import { loadConfig, type Config } from '@ent/common/config';
import { assertSecretsKeyringUsable } from '@ent/common/crypto/keyring';
import { createDb } from '@ent/common/db/connect';
import { migrateToLatest } from '@ent/common/db/migrate';
import { createRedis } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import {
  applyArrangementChange,
  DEFAULT_USAGE_EVENTS_PER_SECOND,
  getArrangement,
  saveArrangement,
} from '@ent/common/metering/arrangement';
import { PLAN_KEY_PATTERN } from '@ent/contract/common';
import { ROLES, type Role } from '@ent/common/auth/scopes';
import { createOrganization } from '../features/provisioning/create-organization.ts';
import { createOperatorInvite } from '../features/provisioning/operator-invite.ts';
import { localConsoleUrl } from '../features/invites/service.ts';
import { createSnapshotPublisher } from '../features/snapshots/publisher.ts';
import { wholeNumber } from './arguments.ts';
import { creditsCommand } from './credits.ts';
import { errorLine } from './error-line.ts';
import { rotateSecrets } from './rotate-secrets.ts';
import { transferCommands } from './transfer.ts';
import { usageCommand } from './usage.ts';

let config: Config;
try {
  config = loadConfig();
} catch (error) {
  // A configuration mistake (e.g. a malformed SECRETS_KEY) is one line for the operator, not a stack trace.
  process.stderr.write(`entctl: ${(error as Error).message}\n`);
  process.exit(1);
}

const organizationName = (raw: string) => {
  if (raw.trim().length === 0 || [...raw].length > 255)
    throw new InvalidArgumentError('must be 1 to 255 characters');
  return raw;
};

const emailAddress = (raw: string) => {
  if (raw.length > 320 || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(raw))
    throw new InvalidArgumentError('must be an email address');
  return raw;
};

const allotmentKey = (raw: string) => {
  if (!new RegExp(PLAN_KEY_PATTERN).test(raw)) {
    throw new InvalidArgumentError('must be 1 to 64 lowercase letters, digits, _ or - (like a plan key)');
  }
  return raw;
};

async function withDb<T>(run: (db: ReturnType<typeof createDb>) => Promise<T>): Promise<T> {
  const db = createDb(config.databaseUrl, { max: 2 });
  try {
    return await run(db);
  } finally {
    await db.destroy();
  }
}

const print = (json: boolean, value: Record<string, unknown>, human: string) =>
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${human}\n`);

const program = new Command()
  .name('entctl')
  .description(
    'Operate the entitlement service: migrate the database, create organizations, set eval arrangements.',
  )
  .showHelpAfterError();

program
  .command('migrate')
  .description(
    "Create the database and the services' restricted role if missing, then apply pending migrations.",
  )
  .option('--json', 'print the result as JSON')
  .action(async (options: { json?: boolean }) => {
    const result = await migrateToLatest({ ownerUrl: config.databaseOwnerUrl, appUrl: config.databaseUrl });
    const applied = (result.results ?? []).map((r) => r.migrationName);
    print(
      Boolean(options.json),
      { applied },
      applied.length ? `applied: ${applied.join(', ')}` : 'already up to date',
    );
  });

const org = program.command('org').description('Organizations and their eval arrangements.');

org
  .command('create')
  .description(
    'Create an organization with an admin service account and print its full-access API key (once).',
  )
  .addOption(
    new Option('--name <name>', 'organization name (1 to 255 characters)')
      .argParser(organizationName)
      .makeOptionMandatory(),
  )
  .option('--json', 'print {organization_id, member_id, service_account_id, api_key} as JSON')
  .action(async (options: { name: string; json?: boolean }) => {
    const created = await withDb((db) => createOrganization(db, options.name));
    // The JSON is DESIGN.md §4's four keys exactly; the slug (sign-in takes it only optionally) is in the text and in
    // `org invite --json`.
    const { organization_id, member_id, service_account_id, api_key } = created;
    print(
      Boolean(options.json),
      { organization_id, member_id, service_account_id, api_key },
      [
        `organization_id     ${created.organization_id}`,
        `slug                ${created.slug}   (the organization, at the console's sign-in)`,
        `member_id           ${created.member_id}`,
        `service_account_id  ${created.service_account_id}`,
        `api_key             ${created.api_key}   (shown once; store it now)`,
        '',
        `A console login for a person: npx entctl org invite --org ${created.organization_id} --email EMAIL`,
      ].join('\n'),
    );
  });

org
  .command('invite')
  .description(
    'Make a console invite link (as POST /org/invites does, audited): whoever opens it sets a password and joins ' +
      'with the role. How a person gets into the console of an organization made by `org create`.',
  )
  .requiredOption('--org <id>', 'organization id (org_...)')
  .addOption(new Option('--role <role>', 'the role whoever joins gets').choices(ROLES).default('admin'))
  .addOption(new Option('--email <email>', 'only this email may join with the link').argParser(emailAddress))
  .option('--json', 'print {invite_id, organization_id, slug, role, email, url, expires_at} as JSON')
  .action(async (options: { org: string; role: Role; email?: string; json?: boolean }) => {
    assertSecretsKeyringUsable(config.secretsKey);
    const consoleUrl = config.consoleUrl ?? localConsoleUrl(config.gatewayPort);
    const invite = await withDb((db) =>
      createOperatorInvite(
        db,
        { secretsKey: config.secretsKey, consoleUrl },
        { organizationId: options.org, role: options.role, email: options.email },
        new Date(),
      ),
    );
    print(
      Boolean(options.json),
      { ...invite },
      [
        `join link   ${invite.url}`,
        `            (${invite.role}${invite.email ? ` for ${invite.email}` : ''}; expires ${invite.expires_at}; ` +
          'whoever opens it sets a password and joins)',
        `sign in at  ${consoleUrl} with organization ${invite.slug}`,
      ].join('\n'),
    );
  });

interface ArrangementOptions {
  org: string;
  evalLimit?: number;
  unlimited?: boolean;
  nonBlocking?: boolean;
  blocking?: boolean;
  burst?: number;
  usageEventsPerSecond?: number;
  plan?: string;
  json?: boolean;
}

org
  .command('arrangement')
  .description(
    "Set an organization's individual eval arrangement. Options not given keep their current value " +
      '(self-serve default: plan free, 250000 evals a month, blocking, burst 100/s).',
  )
  .requiredOption('--org <id>', 'organization id (org_...)')
  .addOption(
    new Option('--eval-limit <n>', 'evals included per UTC month')
      .argParser(wholeNumber(0, Number.MAX_SAFE_INTEGER))
      .conflicts('unlimited'),
  )
  .option('--unlimited', 'no monthly cap: evals never stop and carry no eval headers')
  .addOption(new Option('--non-blocking', 'keep answering evals past the limit').conflicts('blocking'))
  .option('--blocking', 'stop evals 7 days after the limit is first reached (the default)')
  .addOption(
    new Option('--burst <n>', 'eval requests per second before 429').argParser(wholeNumber(1, 2_147_483_647)),
  )
  .addOption(
    new Option(
      '--usage-events-per-second <n>',
      'metered usage events (reports, batch events) per second before 429',
    ).argParser(wholeNumber(1, 2_147_483_647)),
  )
  .addOption(
    new Option(
      '--plan <key>',
      'allotment key reported by GET /org/usage/current (--unlimited without --plan clears it to null; ' +
        'a cap on an organization without a plan key reports "individual")',
    ).argParser(allotmentKey),
  )
  .option('--json', 'print the resulting arrangement as JSON')
  .action(async (options: ArrangementOptions) => {
    const redis = createRedis(config);
    const arrangement = await withDb(async (db) => {
      const current = await getArrangement(db, options.org);
      const next = applyArrangementChange(current, {
        plan: options.plan,
        evalLimit: options.evalLimit,
        unlimited: options.unlimited,
        blocking: options.nonBlocking ? false : options.blocking ? true : undefined,
        burstPerSecond: options.burst,
        usageEventsPerSecond: options.usageEventsPerSecond,
      });
      // Saved with its outbox entry in one transaction: if Redis cannot be reached now, the worker's relay
      // publishes it as soon as it can.
      await saveArrangement(db, options.org, next);
      const publisher = createSnapshotPublisher({ db, redis, redisKeys: redisKeys(config.redisKeyPrefix) });
      await publisher.publishArrangement(options.org).catch((error: unknown) => {
        process.stderr.write(
          `entctl: saved; Redis could not be reached (${(error as Error).message}): ` +
            'the worker will publish the arrangement once it can\n',
        );
      });
      return next;
    }).finally(() => redis.disconnect());
    const body = {
      organization_id: options.org,
      plan: arrangement.plan,
      eval_limit: arrangement.evalLimit,
      // As GET /org/usage/current reports it: nothing can block an organization without a cap.
      blocking: arrangement.evalLimit !== null && arrangement.blocking,
      burst: arrangement.burstPerSecond,
      usage_events_per_second: arrangement.usageEventsPerSecond ?? DEFAULT_USAGE_EVENTS_PER_SECOND,
    };
    print(
      Boolean(options.json),
      body,
      [
        `organization_id  ${body.organization_id}`,
        `plan             ${body.plan ?? 'none'}`,
        `eval_limit       ${body.eval_limit ?? 'unlimited'}`,
        `blocking         ${body.blocking}`,
        `burst            ${body.burst}/s`,
        `usage events     ${body.usage_events_per_second}/s`,
      ].join('\n'),
    );
  });

program.addCommand(usageCommand({ config, withDb, print }));
for (const command of transferCommands({ adminUrl: config.adminUrl, print })) program.addCommand(command);
program.addCommand(creditsCommand({ config, withDb, print }));

program
  .command('snapshots')
  .description('Snapshot documents in Redis (catalog, subscribers, API keys, arrangement).')
  .command('rebuild')
  .description('Rebuild the snapshot documents from Postgres: one organization, or every organization.')
  .option('--org <id>', 'organization id (org_...); default: all')
  .option('--json', 'print {organizations, subscribers} as JSON')
  .action(async (options: { org?: string; json?: boolean }) => {
    const redis = createRedis(config);
    try {
      const totals = await withDb(async (db) => {
        const publisher = createSnapshotPublisher({ db, redis, redisKeys: redisKeys(config.redisKeyPrefix) });
        // An empty --org (an unset shell variable) is an organization that does not exist, never "all".
        const ids =
          options.org !== undefined
            ? [options.org]
            : (await db.selectFrom('organizations').select('id').orderBy('id').execute()).map(
                (row) => row.id,
              );
        let subscribers = 0;
        for (const id of ids) subscribers += (await publisher.rebuildOrganization(id)).subscribers;
        return { organizations: ids.length, subscribers };
      });
      print(
        Boolean(options.json),
        totals,
        `rebuilt ${totals.organizations} organization(s), ${totals.subscribers} subscriber(s)`,
      );
    } finally {
      redis.disconnect();
    }
  });

program
  .command('secrets')
  .description('Secrets stored encrypted with SECRETS_KEY (webhook signing secrets, live invite links).')
  .command('rotate')
  .description(
    'Re-encrypt every stored secret under the current SECRETS_KEY, reading old ones with SECRETS_KEY_PREVIOUS. ' +
      'Run once admin and worker use the new keyring; afterwards SECRETS_KEY_PREVIOUS can be removed. Idempotent.',
  )
  .option(
    '--json',
    'print {key_id, webhook_secrets, invite_tokens} as JSON: the key now in use and the counts',
  )
  .action(async (options: { json?: boolean }) => {
    assertSecretsKeyringUsable(config.secretsKey);
    const result = await withDb((db) => rotateSecrets(db, config.secretsKey));
    print(
      Boolean(options.json),
      { key_id: config.secretsKey.current.id, ...result },
      [
        `current key id   ${config.secretsKey.current.id}`,
        `webhook secrets  ${result.webhook_secrets.reencrypted} re-encrypted, ${result.webhook_secrets.current} already current`,
        `invite tokens    ${result.invite_tokens.reencrypted} re-encrypted, ${result.invite_tokens.current} already current`,
      ].join('\n'),
    );
  });

try {
  await program.parseAsync(process.argv);
} catch (error) {
  process.stderr.write(errorLine(error));
  process.exitCode = 1;
}
