export { BootError, reasonOf } from './boot-error';
export { closeDependencies, connectDependencies, producerOptionsOf } from './dependencies';
export type { Dependencies } from './dependencies';
export { withDeadline } from './deadline';
export { SharedRead } from './shared-read';
export { shutdownInOrder } from './shutdown';
export { CoalescingRenewal } from './coalescing-renewal';
export { RecentReads } from './recent-reads';
