export * from './dist/health/event-mesh.health';
