import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { startInstance } from '../apps/instance/src/instance';
import { loadConfig } from '@libs/config';

/**
 * Writes the gateway's API document to packages/client/openapi.json, which the SDK's types are generated from
 * (`npm run sdk:openapi` then runs openapi-typescript into packages/client/src/generated/api.ts). The document is
 * made from the route table of a booted gateway (apps/gateway/src/operations/openapi.ts), so the script boots a gateway-only
 * instance on a free port against the configured servers, reads `/openapi.json`, and stops it.
 */
export async function servedOpenApiDocument(env: NodeJS.ProcessEnv): Promise<unknown> {
  // The document does not depend on the sealing key; a throwaway one when none is set (nothing is sealed here).
  const keys = env.EVENTMESH_SECURITY_SECRETS_KEYS ?? `openapi:${randomBytes(32).toString('base64')}`;
  const instance = await startInstance(
    loadConfig({ ...env, EVENTMESH_HTTP_PORT: '0', EVENTMESH_SECURITY_SECRETS_KEYS: keys }),
    { roles: ['gateway'] },
  );
  try {
    const response = await fetch(`${instance.url}/openapi.json`);
    if (response.status !== 200) throw new Error(`/openapi.json answered ${response.status}`);
    return await response.json();
  } finally {
    await instance.close();
  }
}

/** The document as the file holds it: stable, two-space JSON with a final newline. */
export const openApiFileText = (document: unknown): string => `${JSON.stringify(document, null, 2)}\n`;

if (require.main === module) {
  const file = path.resolve(__dirname, '../../packages/client/openapi.json');
  servedOpenApiDocument(process.env)
    .then((document) => {
      writeFileSync(file, openApiFileText(document));
      process.stdout.write(`${path.relative(process.cwd(), file)}: written\n`);
      process.exit(0);
    })
    .catch((e: Error) => {
      process.stderr.write(`${e.stack ?? e.message}\n`);
      process.exit(1);
    });
}
