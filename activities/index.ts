export * from './dispatch.activities';
