export * from './gate-policy';
