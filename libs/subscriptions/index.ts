export * from './subscription.schema';
export * from './subscription.service';
export * from './subscription-placement';
export * from './orphan-takeover';
