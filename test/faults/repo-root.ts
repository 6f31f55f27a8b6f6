import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * The repository's root: the nearest folder above this file with a package.json. The harness runs both from
 * sources (jest: test/faults) and built (`npm run chaos`: dist/test/faults), so a fixed `../..` would not do.
 */
export const REPO_ROOT = ((): string => {
  for (let dir = __dirname; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
  }
  throw new Error(`no package.json above ${__dirname}`);
})();

/** The built instance entry (`npm start`). */
export const INSTANCE_ENTRY = path.join(REPO_ROOT, 'dist/apps/instance/src/main.js');
