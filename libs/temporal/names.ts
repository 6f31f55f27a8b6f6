/** Names shared by the worker, the client side and the docs: one place, one spelling. */
export const taskQueueOf = (instanceId: string) => `eventmesh-${instanceId}`;
export const dispatchWorkflowIdOf = (instanceId: string) => `dispatch/${instanceId}`;
