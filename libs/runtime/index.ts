export * from './boot-error';
export * from './dependencies';
export * from './deadline';
export * from './shared-read';
export * from './shutdown';
export * from './coalescing-renewal';
export * from './recent-reads';
