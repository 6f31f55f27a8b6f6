export * from './data-source';
export * from './entities';
export * from './offset-store';
export * from './dead-letter-store';
export * from './dead-letter-retention';
export * from './retry-store';
export * from './lease-store';
