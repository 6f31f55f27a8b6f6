import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Resource } from '@opentelemetry/resources';
import { NoopSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { makeWorkflowExporter } from '@temporalio/interceptors-opentelemetry/lib/worker';
import { bundleWorkflowCode, Worker, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { WORKFLOW_TRACING_INTERCEPTORS } from '../../libs/tracing';

/**
 * Replays recorded histories of the workflows through the current code: a change that breaks determinism
 * fails here, not on a running instance. Histories live in test/replay/histories (recorded with
 * `RECORD_HISTORY=1 npm test -- -t instanceDispatchWorkflow`); keep old ones when workflows change.
 */
describe('workflow replay', () => {
  const dir = path.resolve(__dirname, 'histories');
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  // The workflows bundled once for every history (the same code each case replays): bundling them per case cost
  // about as much as the replays together.
  let workflowBundle: WorkflowBundleWithSourceMap;
  beforeAll(async () => {
    workflowBundle = await bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows') });
  }, 120000);

  it('has recorded histories to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  it.each(files)('replays %s deterministically', async (file) => {
    const history: unknown = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    await expect(Worker.runReplayHistory({ workflowBundle }, history, file)).resolves.toBeUndefined();
  });

  // Tracing can be turned on while workflows run: a worker with the SDK's OpenTelemetry workflow interceptors
  // (EVENTMESH_TRACING_ENABLED=true, libs/tracing/workflow-bundle.ts) replays the histories recorded without them.
  it('replays every history deterministically with the tracing interceptors', async () => {
    const histories = files.map((file) => ({
      workflowId: file,
      history: JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as unknown,
    }));
    const results = Worker.runReplayHistories(
      {
        workflowsPath: require.resolve('../../workflows'),
        interceptors: { workflowModules: [WORKFLOW_TRACING_INTERCEPTORS] },
        sinks: { exporter: makeWorkflowExporter(new NoopSpanProcessor(), Resource.empty()) },
      },
      histories as never,
    );
    const failures: string[] = [];
    let replayed = 0;
    for await (const result of results) {
      replayed++;
      if (result.error) failures.push(`${result.workflowId}: ${String(result.error)}`);
    }
    expect({ replayed, failures }).toEqual({ replayed: files.length, failures: [] });
  });
});
