// The epoch fence and the fenced-run helper every claim -> heartbeat -> fenced-write loop uses (dispatch runs,
// partition leases, connector jobs). A lib of its own so that a process outside the runtime (apps/connectors)
// reuses it without reaching into the runtime's storage.
export * from './epoch-fence';
export * from './fenced-run';
