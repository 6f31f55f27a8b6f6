import { bundleWorkflowCode } from '@temporalio/worker';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TRACED_WORKFLOW_BUNDLE, WORKFLOW_BUNDLE, WORKFLOW_TRACING_INTERCEPTORS } from '@libs/tracing';

/**
 * Bundles workflows/ into dist/workflow-bundle.js, the code the worker loads, and into
 * dist/workflow-bundle-traced.js, the same with the Temporal SDK's OpenTelemetry workflow interceptors (loaded
 * with EVENTMESH_TRACING_ENABLED=true; libs/tracing/workflow-bundle.ts). The Temporal bundler refuses Node
 * built-ins and other non-deterministic modules, so a forbidden import in workflow code fails `npm run build`
 * instead of a worker start.
 */
async function main(): Promise<void> {
  const root = path.resolve(__dirname, '../..');
  for (const [file, workflowInterceptorModules] of [
    [WORKFLOW_BUNDLE, []],
    [TRACED_WORKFLOW_BUNDLE, [WORKFLOW_TRACING_INTERCEPTORS]],
  ] as const) {
    const out = path.join(root, 'dist', file);
    const { code } = await bundleWorkflowCode({
      workflowsPath: path.join(root, 'workflows', 'index.ts'),
      workflowInterceptorModules: [...workflowInterceptorModules],
      logger: {
        log: () => undefined,
        trace: () => undefined,
        debug: () => undefined,
        info: () => undefined,
        warn: (m: string) => process.stderr.write(`${m}\n`),
        error: (m: string) => process.stderr.write(`${m}\n`),
      },
    });
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(out, code);
    process.stdout.write(`workflow bundle: ${path.relative(root, out)} (${Math.round(code.length / 1024)} KiB)\n`);
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`workflow bundle failed: ${(e as Error).message}\n`);
  process.exit(1);
});
