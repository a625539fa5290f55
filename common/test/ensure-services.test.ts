import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../gateway/test/processes.ts';

const script = new URL('../../scripts/ensure-services.sh', import.meta.url).pathname;
const scriptText = readFileSync(script, 'utf8');

/** Runs one of the script's functions (the script sourced, so nothing else runs) with arguments. */
const runFunction = (name: string, ...args: string[]) =>
  execFileSync('bash', ['-c', `source "$0"; ${name} "$@"`, script, ...args], { encoding: 'utf8' });

/** What Debian's pg_createcluster writes: peer on the socket, scram over TCP. */
const DEBIAN_DEFAULT_HBA = `# Database administrative login by Unix domain socket
local   all             postgres                                peer
local   all             all                                     peer
host    all             all             127.0.0.1/32            scram-sha-256
host    all             all             ::1/128                 scram-sha-256
local   replication     all                                     peer
host    replication     all             127.0.0.1/32            scram-sha-256
`;

const rules = (text: string) =>
  text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => line.split(/\s+/));

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'ent-hba-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The addresses the script checks (and would start servers on), sourced with `env` as the only environment. */
const checkedAddresses = (env: Record<string, string>) =>
  execFileSync(
    'bash',
    [
      '-c',
      'source "$1"; echo "$PGHOST_CHECK:$PGPORT_CHECK $REDIS_HOST_CHECK:$REDIS_PORT_CHECK"',
      '_',
      script,
    ],
    {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', ...env },
    },
  ).trim();

describe('scripts/ensure-services.sh: which servers it checks', () => {
  it('the ones the URLs name, so `npm start` with REDIS_URL on another port neither checks nor starts one on 6379', () => {
    expect(checkedAddresses({})).toBe('127.0.0.1:5432 127.0.0.1:6379');
    expect(
      checkedAddresses({
        REDIS_URL: 'redis://:secret@[::1]:6391/2',
        DATABASE_OWNER_URL: 'postgres://postgres@localhost:5433/entitlements',
      }),
    ).toBe('localhost:5433 ::1:6391');
    expect(
      checkedAddresses({
        REDIS_URL: 'rediss://cache.example.com',
        DATABASE_URL: 'postgres://app@db.internal/x',
      }),
    ).toBe('db.internal:5432 cache.example.com:6379');
    // A raw @ in the password (the user part runs to the last @), and a socket directory (the local defaults).
    expect(
      checkedAddresses({
        DATABASE_OWNER_URL: 'postgres://u:p@ss@db.example:5433/x',
        REDIS_URL: 'REDIS://cache.example.com:7000',
      }),
    ).toBe('db.example:5433 cache.example.com:7000');
    expect(checkedAddresses({ DATABASE_OWNER_URL: 'postgres://u@%2Fvar%2Frun%2Fpostgresql/db' })).toBe(
      '127.0.0.1:5432 127.0.0.1:6379',
    );
    // The test suite's own owner URL wins over the services' (npm test runs the script too).
    expect(
      checkedAddresses({
        TEST_DATABASE_OWNER_URL: 'postgres://postgres@127.0.0.2:6543/t',
        DATABASE_URL: 'postgres://a@b/c',
      }),
    ).toBe('127.0.0.2:6543 127.0.0.1:6379');
  });

  it('starts nothing for a server on another host: it waits for it, then says which', () => {
    const result = spawnSync(
      'bash',
      ['-c', 'source "$1"; wait_for() { return 1; }; ensure_redis', '_', script],
      {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '', REDIS_URL: 'redis://192.0.2.1:6379' },
      },
    );
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('Redis is configured on 192.0.2.1:6379, which is not this machine');
  });
});

describe('scripts/ensure-services.sh and pg_hba.conf', () => {
  it('adds trust for the project roles on loopback only, first, once, and keeps every other line', () => {
    const file = join(tempDir(), 'pg_hba.conf');
    writeFileSync(file, DEBIAN_DEFAULT_HBA);
    runFunction('add_local_dev_rules', file);
    runFunction('add_local_dev_rules', file);
    const after = readFileSync(file, 'utf8');
    expect(after.endsWith(DEBIAN_DEFAULT_HBA)).toBe(true);
    const added = rules(after.slice(0, after.length - DEBIAN_DEFAULT_HBA.length));
    expect(added).toEqual([
      ['host', 'all', 'postgres,entitlements_app', '127.0.0.1/32', 'trust'],
      ['host', 'all', 'postgres,entitlements_app', '::1/128', 'trust'],
    ]);
    for (const rule of rules(after).filter((r) => r.at(-1) === 'trust')) {
      expect(rule[2], rule.join(' ')).not.toBe('all');
      expect(['127.0.0.1/32', '::1/128'], rule.join(' ')).toContain(rule[3]);
    }
  });

  it('never writes a rule that trusts every user, and edits pg_hba.conf only through that function', () => {
    expect(scriptText).not.toMatch(/host\s+all\s+all\s+\S+\s+trust/);
    expect(scriptText).not.toMatch(/local\s+all\s+all\s+trust/);
    expect(scriptText).not.toMatch(/sed\s+-i/);
    const edits = [...scriptText.matchAll(/add_local_dev_rules\s+"\$conf\/pg_hba\.conf"/g)];
    expect(edits).toHaveLength(1);
    // Only on the branch where this run installed the package.
    expect(scriptText).toMatch(
      /if \$installed && \[ -f "\$conf\/pg_hba\.conf" \]; then\n[^\n]*\n\s+add_local_dev_rules/,
    );
  });

  it('prints the lines to add instead of editing, when the default owner is refused', () => {
    const lines = runFunction('local_dev_hba_lines');
    expect(lines).toContain('host all postgres,entitlements_app 127.0.0.1/32 trust');
  });

  const initdb = '/usr/lib/postgresql/15/bin/initdb';
  const pgCtl = '/usr/lib/postgresql/15/bin/pg_ctl';
  const canRunCluster = process.getuid?.() === 0 && existsSync(initdb) && existsSync(pgCtl);

  it.skipIf(!canRunCluster)(
    'on a fresh Debian-style cluster: postgres and entitlements_app connect without a password, any other role needs one',
    async () => {
      const dir = tempDir();
      chmodSync(dir, 0o777);
      const data = join(dir, 'data');
      const asPostgres = (command: string) =>
        execFileSync('su', ['postgres', '-c', command], { encoding: 'utf8', timeout: 60_000 });
      asPostgres(`${initdb} -D ${data} --auth-local=peer --auth-host=scram-sha-256 -U postgres >/dev/null`);
      execFileSync('bash', [
        '-c',
        `source "$0"; add_local_dev_rules "$1"`,
        script,
        join(data, 'pg_hba.conf'),
      ]);
      const port = await freePort();
      asPostgres(
        `${pgCtl} -D ${data} -w -t 30 -l ${dir}/log -o "-p ${port} -k ${dir} -c listen_addresses=127.0.0.1" start >/dev/null`,
      );
      try {
        const psql = (user: string, sql: string, password?: string) =>
          spawnSync('psql', ['-w', '-At', `postgresql://${user}@127.0.0.1:${port}/postgres`, '-c', sql], {
            encoding: 'utf8',
            timeout: 10_000,
            env: { ...process.env, PGPASSWORD: password ?? '' },
          });
        expect(psql('postgres', 'select 1').stdout.trim()).toBe('1');
        expect(
          psql('postgres', "CREATE ROLE entitlements_app LOGIN; CREATE ROLE mallory LOGIN PASSWORD 'pw'")
            .status,
        ).toBe(0);
        expect(psql('entitlements_app', 'select 2').stdout.trim()).toBe('2');
        const refused = psql('mallory', 'select 3');
        expect(refused.status).not.toBe(0);
        expect(refused.stderr).toMatch(/password/);
        expect(psql('mallory', 'select 4', 'pw').stdout.trim()).toBe('4');
      } finally {
        asPostgres(`${pgCtl} -D ${data} -w -t 30 -m fast stop >/dev/null`);
      }
    },
    90_000,
  );
});
