export * from './dispatch.activities';
export * from './ownership.activities';
