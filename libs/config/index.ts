export { ConfigError, describeSettings, loadConfig } from './config';
export type {
  AclDefault,
  DeliveryTopology,
  EventMeshConfig,
  InstanceRole,
  OrphanTakeoverMode,
  SessionsConfig,
  SharedTopicAccess,
  SinkRange,
} from './config';
export { TENANT_NAME } from './setting';
export type { SettingDoc } from './setting';
export { tenantKafkaPartOf } from './tenant-kafka-part';
