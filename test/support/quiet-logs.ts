import { configureLogging } from '@libs/logging';

// In-process runtime code logs only errors during tests, and no audit lines (EVENTMESH_TEST_LOG_LEVEL=debug to see
// everything).
configureLogging(process.env.EVENTMESH_TEST_LOG_LEVEL ?? 'error', {}, process.env.EVENTMESH_TEST_LOG_LEVEL ?? 'silent');
