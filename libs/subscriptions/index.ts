export * from './subscription.schema';
export * from './subscription.service';
export * from './subscription-placement';
export * from './orphan-takeover';
export * from './subscription-offsets';
export * from './subscription-delivery-state';
export * from './subscription-ensure';
