export * from './dead-letter-query';
export * from './dead-letter-service';
export * from './dead-letter-replays';
