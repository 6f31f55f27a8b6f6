export { SESSIONS_LINK_PATH } from './session-links';
export type { TenantSessionUsage } from './session-quotas';
export { SessionServer } from './session-server';
export type { AgentView } from './session-server';
