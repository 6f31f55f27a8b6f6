export { TopicNamespace, configureTopicSchema, createTopicSchema, topicGrantSchema } from './topic-namespace';
export type { TenantTopicView, TopicGrantView } from './topic-namespace';
