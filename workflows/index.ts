// The Temporal workflow bundle: deterministic code only. Lint forbids Node built-ins and I/O libraries here,
export * from './dispatch.workflow';
