import {
  A2A_TASK_CANCEL_WORKFLOW,
  A2A_TASK_RETENTION_WORKFLOW,
  A2A_TASK_WORKFLOW,
  A2ATaskCancelWorkflow,
  A2ATaskWorkflow,
  COORDINATOR_WORKFLOW,
  CoordinatorWorkflow,
  DLQ_REPLAY_WORKFLOW,
  DlqReplayWorkflow,
  DLQ_RETENTION_WORKFLOW,
  INSTANCE_DISPATCH_WORKFLOW,
  InstanceDispatchWorkflow,
  INSTANCE_LEASE_WORKFLOW,
  InstanceLeaseWorkflow,
  RetentionWorkflow,
} from '../../contracts';
import * as workflows from '../../workflows';

/**
 * libs and apps start these workflows by the name and signature their contract declares (contracts/), without importing
 * workflow code: the worker runs a workflow under its exported name, so each name must be the export's, and each
 * signature the export's (checked by the type-check: `satisfies`).
 */
describe('workflow names in the contracts', () => {
  const started: [string, unknown][] = [
    [COORDINATOR_WORKFLOW, workflows.coordinatorWorkflow satisfies CoordinatorWorkflow],
    [INSTANCE_LEASE_WORKFLOW, workflows.instanceLeaseWorkflow satisfies InstanceLeaseWorkflow],
    [A2A_TASK_WORKFLOW, workflows.a2aTaskWorkflowV2 satisfies A2ATaskWorkflow],
    [A2A_TASK_CANCEL_WORKFLOW, workflows.a2aTaskCancelWorkflow satisfies A2ATaskCancelWorkflow],
    [DLQ_REPLAY_WORKFLOW, workflows.dlqReplayWorkflow satisfies DlqReplayWorkflow],
    [INSTANCE_DISPATCH_WORKFLOW, workflows.instanceDispatchWorkflow satisfies InstanceDispatchWorkflow],
    [DLQ_RETENTION_WORKFLOW, workflows.dlqRetentionWorkflow satisfies RetentionWorkflow],
    [A2A_TASK_RETENTION_WORKFLOW, workflows.a2aTaskRetentionWorkflow satisfies RetentionWorkflow],
  ];

  it.each(started)('workflows/ exports the workflow started as %s under that name', (name, workflow) => {
    expect((workflows as Record<string, unknown>)[name]).toBe(workflow);
  });
});
