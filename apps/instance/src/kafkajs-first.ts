import { installFastKafkajsEncoding } from '@libs/kafkajs-patches';

// Before anything loads kafkajs: its producer keeps the grouping of messages by partition it required when it
// loaded, so the faster one goes in first (libs/kafkajs-patches).
installFastKafkajsEncoding();
