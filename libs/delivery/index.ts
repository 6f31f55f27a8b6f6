export * from './webhook-sender';
export * from './dispatch-loop';
