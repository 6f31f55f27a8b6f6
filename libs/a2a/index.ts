export * from './agent-card';
export * from './agent-clients';
export * from './agent-store';
export * from './broker';
export * from './mesh-task-handler';
export * from './task-states';
export * from './task-store';
