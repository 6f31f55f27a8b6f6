export * from './ownership-agent';
export * from './ownership-admin';
