/**
 * The Temporal SDK's OpenTelemetry workflow interceptors run inside the workflow sandbox, so they are bundled
 * with the workflow code: `npm run build` writes two bundles (scripts/build-workflow-bundle.ts), the plain one
 * a worker loads with tracing off (unchanged by tracing) and one with these interceptors, loaded with it on.
 */
export const WORKFLOW_BUNDLE = 'workflow-bundle.js';
export const TRACED_WORKFLOW_BUNDLE = 'workflow-bundle-traced.js';

/** The module of the SDK's workflow interceptors (resolved only: loading it outside the sandbox is useless). */
export const WORKFLOW_TRACING_INTERCEPTORS =
  require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');
