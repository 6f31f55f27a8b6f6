/** Names shared by the worker, the client side and the docs: one place, one spelling. */
export const dispatchWorkflowIdOf = (instanceId: string) => `dispatch/${instanceId}`;
