import { join, resolve } from 'node:path';
import { devTrustEnv, ensureDevSigningKey, mintDevToken, parseMintArgs } from '@libs/security';

/**
 * `npm run --silent token:mint -- --tenant acme --scopes publish,subscribe [--sub alice] [--ttl 3600]`: prints a
 * token signed with the local dev key (made on first use under .data/dev-token/) on stdout, and on stderr the
 * settings a runtime needs to trust it.
 */
async function main(): Promise<void> {
  const args = parseMintArgs(process.argv.slice(2));
  const root = resolve(__dirname, '..', '..');
  const dir = resolve(args.dir ?? join(root, '.data', 'dev-token'));
  const key = await ensureDevSigningKey(dir);
  const token = await mintDevToken(key, args);
  if (key.created) process.stderr.write(`token:mint: made a dev signing key pair in ${dir}\n`);
  process.stderr.write(
    `token:mint: a ${args.scopes.join('+')} token for ${args.sub} of tenant ${args.tenant}, valid ${args.ttlSeconds} s. ` +
      `A runtime trusts it with:\n${devTrustEnv(key, args)
        .map((line) => `  ${line}`)
        .join('\n')}\n`,
  );
  process.stdout.write(`${token}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`token:mint: ${(e as Error).message}\n`);
  process.exit(64);
});
