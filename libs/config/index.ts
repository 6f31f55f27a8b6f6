export * from './config';
export { TENANT_NAME } from './setting';
export type { SettingDoc } from './setting';
export { tenantKafkaPartOf } from './tenant-kafka-part';
