export * from './boot-error';
export * from './dependencies';
export * from './deadline';
