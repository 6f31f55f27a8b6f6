import type { WorkflowClientInterceptor } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/worker';
import type { OpenTelemetrySinks } from '@temporalio/interceptors-opentelemetry/lib/workflow/definitions';
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';
import type { OtelTracing } from './otel-tracing';
import { WORKFLOW_TRACING_INTERCEPTORS } from './workflow-bundle';

/** The Temporal SDK's tracing on the client and the workers, wired to the process's tracer and span processor. */
export interface TemporalTracing {
  /** Client: a span per workflow start, signal, query..., its context handed to the workflow in its headers. */
  clientInterceptors: WorkflowClientInterceptor[];
  /** Worker: a span per activity run (child of the workflow's schedule-activity span). */
  activityInterceptors: ActivityInterceptorsFactory[];
  /**
   * The workflow interceptors' module, for a worker that bundles the workflow code itself (the built traced
   * bundle has it already: workflow-bundle.ts).
   */
  workflowModules: string[];
  /** The sink through which the workflow sandbox's spans (run, schedule activity, continue-as-new) leave it. */
  sinks: InjectedSinks<OpenTelemetrySinks>;
}

export function temporalTracingOf(tracing: OtelTracing): TemporalTracing {
  const tracer = tracing.tracer;
  return {
    clientInterceptors: [new OpenTelemetryWorkflowClientInterceptor({ tracer })],
    activityInterceptors: [
      (ctx) => ({
        inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }),
        outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
      }),
    ],
    workflowModules: [WORKFLOW_TRACING_INTERCEPTORS],
    sinks: { exporter: makeWorkflowExporter(tracing.spanProcessor, tracing.resource) },
  };
}
