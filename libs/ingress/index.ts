export * from './event-ingress';
