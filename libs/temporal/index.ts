export * from './names';
export * from './temporal-connection';
