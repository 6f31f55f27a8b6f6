import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';

/**
 * Replays recorded histories of the workflows through the current code: a change that breaks determinism
 * fails here, not on a running instance. Histories live in test/replay/histories (recorded with
 * `RECORD_HISTORY=1 npm test -- -t instanceDispatchWorkflow`); keep old ones when workflows change.
 */
describe('workflow replay', () => {
  const dir = path.resolve(__dirname, 'histories');
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

  it('has recorded histories to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  it.each(files)('replays %s deterministically', async (file) => {
    const history: unknown = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    await expect(
      Worker.runReplayHistory({ workflowsPath: require.resolve('../../workflows') }, history, file),
    ).resolves.toBeUndefined();
  });
});
