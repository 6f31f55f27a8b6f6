import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * generated/api.ts is openapi-typescript's output for packages/client/openapi.json, committed; this fails when
 * either was changed without the other (`npm run sdk:types` regenerates it). test/integration/sdk-openapi.spec.ts
 * holds openapi.json to the document a booted gateway serves.
 */
describe('the generated API types', () => {
  it('are what openapi-typescript makes of the committed API document', () => {
    const root = path.resolve(__dirname, '../../../..');
    const dir = mkdtempSync(path.join(tmpdir(), 'sdk-types-'));
    try {
      const out = path.join(dir, 'api.ts');
      const cli = path.join(root, 'node_modules/openapi-typescript/bin/cli.js');
      const run = spawnSync(process.execPath, [cli, 'packages/client/openapi.json', '-o', out], {
        cwd: root,
        encoding: 'utf8',
      });
      expect(run.status).toBe(0);
      expect(readFileSync(out, 'utf8')).toBe(readFileSync(path.join(__dirname, 'api.ts'), 'utf8'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
