export { EventIngress, toFrames } from './event-ingress';
export type { PublishRequest } from './event-ingress';
