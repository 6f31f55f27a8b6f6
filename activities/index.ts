export * from './dispatch.activities';
export * from './ownership.activities';
export * from './a2a-task.activities';
export * from './dead-letter.activities';
