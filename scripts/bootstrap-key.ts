import { ConfigError, loadConfig } from '@libs/config';
import { reasonOf } from '@libs/runtime';
import { newApiKeyCredential } from '@libs/security';
import { ApiKeyStore, createDataSource } from '@libs/storage';

/** The name of the bootstrap key: while one is not revoked, the command makes no other. */
const BOOTSTRAP_NAME = 'bootstrap-operator';

/**
 * `npm run --silent key:bootstrap`: the first operator credential when no identity provider issues an operator JWT
 * (docs/security.md, Bootstrap). Run beside the database with the runtime's settings, it writes one API key of the
 * operator tenant (EVENTMESH_ADMIN_SECURITY_OPERATOR_TENANT) with every scope, principal `bootstrap-operator`, and
 * prints it once on stdout. Reaching Postgres is the proof of being the operator, as it is for `npm run migrate`.
 * It refuses while an earlier bootstrap key is still unrevoked: revoke it (DELETE /admin/api-keys/{id}) once real
 * credentials exist, and a lost one is revoked before another is made.
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const pg = config.postgres;
  const tenant = config.admin.security.operatorTenant;
  const db = createDataSource(pg, 'eventmesh-key-bootstrap');
  try {
    await db.initialize();
  } catch (e) {
    throw new Error(`cannot connect to Postgres at ${pg.host}:${pg.port} database "${pg.database}": ${reasonOf(e)}`);
  }
  try {
    const store = new ApiKeyStore(db);
    const live = (await store.list(tenant)).find((k) => k.name === BOOTSTRAP_NAME && k.revokedAt === null);
    if (live)
      throw new Error(
        `a bootstrap key (${live.id}) of tenant ${tenant} is not revoked; revoke it first (DELETE /admin/api-keys/${live.id})`,
      );
    const credential = newApiKeyCredential();
    await store.create({
      id: credential.id,
      tenant,
      principal: BOOTSTRAP_NAME,
      name: BOOTSTRAP_NAME,
      scopes: ['publish', 'subscribe', 'admin'],
      secretHash: credential.secretHash,
    });
    process.stderr.write(
      `key:bootstrap: an admin API key ${credential.id} of the operator tenant ${tenant} (database ${pg.database}); shown this once\n`,
    );
    process.stdout.write(`${credential.token}\n`);
  } finally {
    await db.destroy();
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`key:bootstrap: ${e instanceof ConfigError ? e.message : reasonOf(e)}\n`);
  process.exit(1);
});
