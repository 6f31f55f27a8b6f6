export * from './ownership-agent';
export * from './ownership-admin';
export * from './liveness-lock';
export * from './crash-watch';
