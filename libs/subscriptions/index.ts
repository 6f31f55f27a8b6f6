export * from './subscription.schema';
export * from './subscription.service';
