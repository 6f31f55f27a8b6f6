import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { builtBundle } from './temporal-runtime';

describe('builtBundle: the workflow bundle a worker loads', () => {
  let root: string;
  const at = (file: string, seconds: number) => {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), '');
    utimesSync(path.join(root, file), seconds, seconds);
  };

  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'bundle-'));
    at('workflows/a.workflow.ts', 1000);
    at('contracts/a.contract.ts', 1000);
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('loads the bundle beside the compiled code, as a built process has it', () => {
    at('workflow-bundle.js', 500);
    expect(builtBundle('workflow-bundle.js', root)).toBe(path.join(root, 'workflow-bundle.js'));
  });

  it("loads dist's bundle from the sources when it is newer than every workflow and contract file", () => {
    at('dist/workflow-bundle.js', 2000);
    expect(builtBundle('workflow-bundle.js', root)).toBe(path.join(root, 'dist/workflow-bundle.js'));
  });

  it('never loads a stale bundle: a workflow or contract file changed after the build means bundling the sources', () => {
    at('dist/workflow-bundle.js', 2000);
    at('workflows/a.workflow.ts', 3000);
    expect(builtBundle('workflow-bundle.js', root)).toBeUndefined();
    at('workflows/a.workflow.ts', 1000);
    at('contracts/a.contract.ts', 3000);
    expect(builtBundle('workflow-bundle.js', root)).toBeUndefined();
  });

  it('bundles the sources when nothing was built', () => {
    expect(builtBundle('workflow-bundle.js', root)).toBeUndefined();
  });
});
