export * from './dispatch.activities';
export * from './ownership.activities';
export * from './dead-letter.activities';
