import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { Resource } from '@opentelemetry/resources';
import { NoopSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { makeWorkflowExporter } from '@temporalio/interceptors-opentelemetry/lib/worker';
import { bundleWorkflowCode, Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { TRACED_WORKFLOW_BUNDLE, WORKFLOW_BUNDLE, WORKFLOW_TRACING_INTERCEPTORS } from '@libs/tracing';
import { builtBundle } from '../../apps/worker/src/temporal-runtime';

/**
 * Replays recorded histories of the workflows through the current code: a change that breaks determinism
 * fails here, not on a running instance. Histories live in test/replay/histories (recorded with
 * `RECORD_HISTORY=1 npm test -- -t instanceDispatchWorkflow`); keep old ones when workflows change.
 */
describe('workflow replay', () => {
  const dir = path.resolve(__dirname, 'histories');
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  // The workflows bundled once for every history (the same code each case replays): bundling them per case cost
  // about as much as the replays together. The bundle `npm run build` wrote, what an instance loads, when it holds
  // the current workflow code (builtBundle: newer than every workflow and contract file); else the sources, bundled.
  let workflowBundle: ReplayWorkerOptions['workflowBundle'];
  beforeAll(async () => {
    const built = builtBundle(WORKFLOW_BUNDLE);
    workflowBundle = built
      ? { codePath: built }
      : await bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows') });
  }, 120000);

  it('has recorded histories to replay', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  it.each(files)('replays %s deterministically', async (file) => {
    const history: unknown = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    await expect(Worker.runReplayHistory({ workflowBundle }, history, file)).resolves.toBeUndefined();
  });

  // The calls into a workflow's sandbox are the largest part of the workflow thread's CPU per A2A task
  // (docs/benchmarks.md, bench:a2a): per activation, the activation, then a pass over the workflow's conditions,
  // repeated while a pass unblocks one. A task that settles at its first attempt, with no push config, wakes nothing
  // more once it settles: one pass per activation.
  it('replays a task settled at its first attempt with one pass over its conditions per activation', async () => {
    const history: unknown = JSON.parse(readFileSync(path.join(dir, 'a2a-task-v2-completed.json'), 'utf8'));
    const calls: string[] = [];
    const runInContext = vm.Script.prototype.runInContext;
    // The SDK names the call into the sandbox in the context's `__temporal_args` ([holder, function name, args]).
    const spy = jest.spyOn(vm.Script.prototype, 'runInContext').mockImplementation(function (
      this: vm.Script,
      context,
      options,
    ) {
      const args = (context as { __temporal_args?: unknown[] }).__temporal_args;
      if (args) calls.push(String(args[1]));
      return runInContext.call(this, context, options) as unknown;
    });
    try {
      // A replay worker runs the workflow in this thread (the SDK's debug mode), where the spy is.
      await Worker.runReplayHistory({ workflowBundle }, history, 'a2a-task-v2-completed');
    } finally {
      spy.mockRestore();
    }
    const count = (name: string) => calls.filter((call) => call === name).length;
    expect(count('activate')).toBe(2);
    expect(count('tryUnblockConditions')).toBe(count('activate'));
  });

  // Tracing can be turned on while workflows run: a worker with the SDK's OpenTelemetry workflow interceptors
  // (EVENTMESH_TRACING_ENABLED=true, libs/tracing/workflow-bundle.ts) replays the histories recorded without them.
  it('replays every history deterministically with the tracing interceptors', async () => {
    const histories = files.map((file) => ({
      workflowId: file,
      history: JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as unknown,
    }));
    const sinks = { exporter: makeWorkflowExporter(new NoopSpanProcessor(), Resource.empty()) };
    // The traced bundle the build wrote (the interceptors bundled in), else the sources with the interceptors.
    const built = builtBundle(TRACED_WORKFLOW_BUNDLE);
    const results = Worker.runReplayHistories(
      built
        ? { workflowBundle: { codePath: built }, sinks }
        : {
            workflowsPath: require.resolve('../../workflows'),
            interceptors: { workflowModules: [WORKFLOW_TRACING_INTERCEPTORS] },
            sinks,
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
