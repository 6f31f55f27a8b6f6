import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * scripts/infra.sh in a second checkout while this one's servers run: `start` must not take them for its own
 * (its stop, and the fault tests that kill and restart servers, act on its own .tools and .data), so it stops
 * and names the checkout that started them. The copy holds only the script and the jar list it reads.
 */
describe('scripts/infra.sh start in another checkout', () => {
  const root = path.resolve(__dirname, '../..');
  // The checkout whose .data the servers use (a git worktree may link its .data to another checkout's).
  const owner = path.dirname(realpathSync(path.join(root, '.data')));
  let other: string;

  beforeAll(() => {
    other = mkdtempSync(path.join(tmpdir(), 'eventmesh-other-checkout-'));
    mkdirSync(path.join(other, 'scripts/infra'), { recursive: true });
    copyFileSync(path.join(root, 'scripts/infra.sh'), path.join(other, 'scripts/infra.sh'));
    copyFileSync(path.join(root, 'scripts/infra/kafka-pom.xml'), path.join(other, 'scripts/infra/kafka-pom.xml'));
  });
  afterAll(() => rmSync(other, { recursive: true, force: true }));

  it.each(['postgres', 'kafka', 'temporal'])('refuses the %s this checkout started, naming it', async (server) => {
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      // The test's own settings point at this checkout's servers; the copy must use the same addresses.
      execFile(
        'bash',
        [path.join(other, 'scripts/infra.sh'), 'start', server],
        { timeout: 30000, env: process.env },
        (error, _stdout, stderr) =>
          resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stderr }),
      );
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${server}: `);
    expect(result.stderr).toContain(`another checkout of this project started (${owner})`);
    expect(result.stderr).toContain(`cd ${owner} && bash scripts/infra.sh stop ${server}`);
  });
});
